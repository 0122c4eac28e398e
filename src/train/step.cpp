#include "train/step.h"

#include <limits>

#include "optim/clip.h"

namespace seqtrain {

TrainStep::TrainStep(Model& model, Optimizer& optimizer, LrSchedule& schedule, StepOptions options)
    : model_(model), optimizer_(optimizer), schedule_(schedule), options_(options) {
  ST_CHECK(options_.grad_accum >= 1, "train.grad_accum must be at least 1, got {}", options_.grad_accum);
  model_.params().zero_grad();
}

StepResult TrainStep::run(const Tensor& x, const Tensor& y, uint64_t seed) {
  arena_.reset();
  model_.set_dropout_seed(seed);
  Tensor pred = model_.forward(x, arena_, true);
  loss_sum_ += loss_forward(options_.loss, pred, y, options_.loss_options);
  ++loss_count_;
  // Each micro-batch contributes 1/k of the mean, so k micro-batches equal one big batch; under
  // loss scaling the gradient is that times the scale, as backward of scaler.scale(loss / k).
  Tensor dpred = arena_.tensor(pred.shape);
  const float scale = options_.scaler ? options_.scaler->scale() : 1.0f;
  loss_backward(options_.loss, pred, y, dpred, scale * (1.0f / static_cast<float>(options_.grad_accum)),
                options_.loss_options);
  model_.backward(dpred, arena_);

  StepResult r;
  if (++micro_ < options_.grad_accum) return r;
  micro_ = 0;
  ParamStore& ps = model_.params();
  // The one place gradients cross ranks: after the last micro-batch, before anything reads them.
  if (options_.comm) options_.comm->all_reduce_sum(ps.grads(), ps.size());
  r.lr = schedule_.lr(updates_);
  if (options_.scaler) {
    const bool finite = options_.scaler->unscale(ps.grads(), ps.size());
    options_.scaler->update(!finite);
    if (!finite) {
      r.skipped = true;
      r.grad_norm = std::numeric_limits<double>::quiet_NaN();
      ps.zero_grad();
      ++updates_;
      r.updated = true;
      return r;
    }
  }
  r.grad_norm = options_.grad_clip > 0 ? clip_grad_norm(ps.grads(), ps.size(), options_.grad_clip)
                                       : grad_norm(ps.grads(), ps.size());
  optimizer_.step(ps.params(), ps.grads(), ps.size(), r.lr);
  ps.zero_grad();
  ++updates_;
  r.updated = true;
  return r;
}

double TrainStep::take_loss(int64_t* batches) {
  double mean = loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : 0.0;
  if (batches) *batches = loss_count_;
  loss_sum_ = 0.0;
  loss_count_ = 0;
  return mean;
}

}  // namespace seqtrain
