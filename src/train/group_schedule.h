// GroupSchedule: the parameter groups of each epoch of a run. train.param_groups as given
// (optim/param_groups.h), and the fine-tuning schedule on top: the encoder (every tensor a
// pretrained encoder brings, models/encoder.h's is_encoder_tensor) is frozen for the first
// train.freeze_encoder_epochs epochs and learns with lr * train.encoder_lr_scale afterwards.
// The groups follow the epoch rather than the step so that a resumed run, which knows its
// epoch, is back in the same state without saving the groups themselves; the optimizer's own
// state (its per-range update counts) carries what the frozen epochs left behind.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "nn/params.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"

namespace seqtrain {

class GroupSchedule {
 public:
  // Resolves the groups against the model's tensors. Error naming the key when a group's prefix
  // matches no tensor, when train.freeze_encoder_epochs exceeds train.epochs, or when the
  // fine-tuning keys are set for a model without both an encoder and a head.
  GroupSchedule(const TrainConfig& train, const ParamStore& params);

  // Gives the optimizer the groups of `epoch` and marks the store's frozen entries (the models
  // skip their weight-gradient work). Cheap: the training loop calls it at every epoch start.
  void apply(int64_t epoch, ParamStore& params, Optimizer& optimizer) const;
  // The groups of `epoch`, one per ParamStore entry.
  std::vector<ParamGroup> at(int64_t epoch) const;

 private:
  std::vector<ParamGroup> base_;  // per entry, from train.param_groups
  std::vector<bool> encoder_;     // per entry
  int64_t freeze_epochs_ = 0;
  double encoder_scale_ = 1.0;
};

}  // namespace seqtrain
