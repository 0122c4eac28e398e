// Augmentation of series windows for training: gaussian jitter, scaling, magnitude warp, time
// shift and random time masking, applied to x only (inputs [T, F] per sample; targets are
// left alone so a forecast target stays the true future).
//
// Each sample draws from its own Rng seeded by mix_seed(mix_seed(seed, epoch), sample index),
// so a sample's augmentation depends on (seed, epoch, sample) only: not on the batch it lands
// in, the worker that fills it or the worker count. Transforms run in a fixed order (shift,
// warp, scale, jitter, mask) and draw only when enabled, so turning one off does not change
// the random stream of those before it.
#pragma once
#include <cstdint>
#include <string>

#include "data/loader.h"

namespace seqtrain {

struct AugmentOptions {
  uint64_t seed = 0;
  float jitter_sigma = 0;    // x += N(0, jitter_sigma) per element
  float scale_sigma = 0;     // x[:, f] *= 1 + N(0, scale_sigma), one factor per feature
  float warp_sigma = 0;      // x[:, f] *= curve_f(t): knots + 2 anchors at 1 + N(0, warp_sigma),
  int64_t warp_knots = 4;    //   evenly spaced over T, joined linearly
  int64_t shift_max = 0;     // roll by s in [-shift_max, shift_max] steps, edge value repeated
  float mask_prob = 0;       // each step starts a masked run with this probability ...
  int64_t mask_width = 1;    //   ... of mask_width steps set to 0 (the mean after z-score)

  bool enabled() const {
    return jitter_sigma > 0 || scale_sigma > 0 || warp_sigma > 0 || shift_max > 0 || mask_prob > 0;
  }
  // Throws Error naming the config key (under `prefix`, e.g. "data.augment") of a bad value.
  void validate(const std::string& prefix = "data.augment") const;
};

// Augments one window x of `steps` rows of `features` values (row-major) in place, drawing
// from Rng(sample_seed).
void augment_window(const AugmentOptions& opt, uint64_t sample_seed, float* x, int64_t steps, int64_t features);
// The seed augment_window gets for (options seed, epoch, sample index).
uint64_t augment_seed(uint64_t seed, int64_t epoch, int64_t sample);

// Wraps a training BatchSource (which must outlive it); x of every sample is [steps, features]
// with steps * features == base.x_size(). Use for the train split only: val/test read the base.
class AugmentedSource final : public BatchSource {
 public:
  AugmentedSource(const BatchSource& base, AugmentOptions opt, int64_t steps, int64_t features);
  int64_t size() const override { return base_.size(); }
  int64_t x_size() const override { return base_.x_size(); }
  int64_t y_size() const override { return base_.y_size(); }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  bool has_lengths() const override { return base_.has_lengths(); }
  void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const override { base_.fill_lengths(idx, lengths); }
  const AugmentOptions& options() const { return opt_; }

 private:
  const BatchSource& base_;
  AugmentOptions opt_;
  int64_t steps_, features_;
};

}  // namespace seqtrain
