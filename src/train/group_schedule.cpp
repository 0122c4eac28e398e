#include "train/group_schedule.h"

#include "core/error.h"
#include "models/encoder.h"

namespace seqtrain {

GroupSchedule::GroupSchedule(const TrainConfig& t, const ParamStore& params)
    : base_(entry_groups(params, t.param_groups, "train.param_groups")),
      freeze_epochs_(t.freeze_encoder_epochs), encoder_scale_(t.encoder_lr_scale) {
  ST_CHECK(freeze_epochs_ <= t.epochs, "config key 'train.freeze_encoder_epochs' is {} but train.epochs is {}: the run "
           "would end before the encoder is unfrozen; lower train.freeze_encoder_epochs to at most {} or raise "
           "train.epochs", freeze_epochs_, t.epochs, t.epochs);
  size_t encoder = 0;
  for (const ParamEntry& e : params.entries()) {
    encoder_.push_back(is_encoder_tensor(e.name));
    encoder += encoder_.back() ? 1 : 0;
  }
  const bool split = encoder > 0 && encoder < encoder_.size();
  const char* key = freeze_epochs_ > 0 ? "train.freeze_encoder_epochs" : "train.encoder_lr_scale";
  ST_CHECK(split || (freeze_epochs_ == 0 && encoder_scale_ == 1.0),
           "config key '{}' is set, but this model has no encoder/head split to fine-tune: {} (its tensors start "
           "with: {}); the encoder is every tensor outside head.*, future_head.*, decoder.* and mask_token. Use it "
           "with a classifier or forecaster (lstm, gru, transformer, cnn), or set train.freeze_encoder_epochs: 0 and "
           "train.encoder_lr_scale: 1", key,
           encoder == 0 ? "it has no encoder tensors" : "it has nothing outside its encoder",
           tensor_name_prefixes(params));
}

std::vector<ParamGroup> GroupSchedule::at(int64_t epoch) const {
  std::vector<ParamGroup> out = base_;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!encoder_[i]) continue;
    out[i].lr_scale *= encoder_scale_;
    if (epoch < freeze_epochs_) out[i].frozen = true;
  }
  return out;
}

void GroupSchedule::apply(int64_t epoch, ParamStore& params, Optimizer& optimizer) const {
  const std::vector<ParamGroup> groups = at(epoch);
  // Every tensor in the optimizer's own group; buffers (BatchNorm's running statistics) need
  // their frozen runs even then.
  bool plain = !params.has_buffers();
  for (const ParamGroup& g : groups) plain = plain && g == ParamGroup{g.prefix, 1.0, std::nullopt, false};
  optimizer.set_groups(plain ? std::vector<GroupRun>{} : group_runs(params, groups));
  apply_frozen(params, groups);
}

}  // namespace seqtrain
