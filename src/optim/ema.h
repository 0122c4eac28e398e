// Ema: an exponential moving average of the flat parameter buffer (train.ema_decay), the weights
// a run validates, early-stops, checkpoints (model.safetensors), tests, evaluates, predicts and
// exports with. It follows torch.optim.swa_utils.AveragedModel with an EMA avg_fn, updated after
// every optimizer step: the first update copies the weights (AveragedModel's n_averaged == 0),
// each later one moves the average a (1 - decay) share toward them,
//   ema += (1 - decay) * (p - ema)
// torch.lerp's form of decay * ema + (1 - decay) * p (torch's get_ema_multi_avg_fn): the same
// within rounding, and exact where p == ema, so the average of a tensor frozen from the first
// step stays bitwise its weights. There is no warm-up of the decay: starting at the first step's
// weights, not at the initialization, is the warm-up AveragedModel has.
// Buffers (ParamEntry::buffer: BatchNorm's running statistics) are not averaged: as in
// AveragedModel's default (use_buffers=False), they follow the model's own after every update,
// copied over the average (set_copied), so the averaged weights validate with the current
// statistics and num_batches_tracked stays a whole count.
// The average lives in the parameters' backend memory; update() is three passes of the
// backend's copy and axpy. A second buffer holds p - ema during an update and the trained
// weights while use_average() has the average in their place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"

namespace seqtrain {

class Ema {
 public:
  // decay in (0, 1); anything else is an Error naming train.ema_decay.
  explicit Ema(double decay, Backend& backend = default_backend());

  double decay() const { return decay_; }
  // Updates so far (AveragedModel's n_averaged).
  int64_t updates() const { return updates_; }

  // After an optimizer step: folds params[0, n) into the average. The first call fixes n.
  void update(const float* params, size_t n);
  // The (offset, count) stretches of the buffer that update() copies instead of averaging.
  void set_copied(std::vector<std::pair<size_t, size_t>> ranges) { copied_ = std::move(ranges); }

  // The average (n elements of the backend's memory; params themselves before any update).
  // Downloads it; an Ema with no update yet has nothing to give and throws.
  std::vector<float> average() const;
  // Continues from a checkpoint: the average and how many updates it holds (0: none, and
  // `average` is ignored).
  void load(std::span<const float> average, int64_t updates);

  // Puts the average into params[0, n) and keeps the trained weights aside; restore() puts
  // them back, bitwise. Before the first update the average is the weights: both do nothing.
  // update() is refused in between (it would average the average).
  void use_average(float* params, size_t n);
  void restore(float* params, size_t n);
  bool in_use() const { return in_use_; }

 private:
  void allocate(size_t n);
  double decay_;
  Backend* backend_;
  int64_t updates_ = 0;
  size_t n_ = 0;
  DeviceBuffer average_, other_;  // other_: p - ema in update(), the trained weights in use
  std::vector<std::pair<size_t, size_t>> copied_;
  bool in_use_ = false;
};

// The average in the parameters for a scope (validation, a checkpoint's weights); a null Ema
// does nothing.
class AveragedWeights {
 public:
  AveragedWeights(Ema* ema, float* params, size_t n) : ema_(ema), params_(params), n_(n) {
    if (ema_) ema_->use_average(params_, n_);
  }
  ~AveragedWeights() {
    if (ema_) ema_->restore(params_, n_);
  }
  AveragedWeights(const AveragedWeights&) = delete;
  AveragedWeights& operator=(const AveragedWeights&) = delete;

 private:
  Ema* ema_;
  float* params_;
  size_t n_;
};

}  // namespace seqtrain
