// LossScaler: dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's rules.
//
// fp16's smallest normal is 6e-5, and many gradients are smaller: the loss gradient is
// multiplied by scale() before backward so they stay representable, and the accumulated
// gradients are divided by it again (unscale) before clipping and the optimizer step. When the
// scale is too large some gradient overflows to inf (or becomes NaN): that step is skipped
// (no parameter update; the optimizer's moments and step count stay as they were) and the
// scale is multiplied by backoff_factor. After growth_interval consecutive clean steps the
// scale is multiplied by growth_factor, so it tracks the largest safe value over a run.
//
// As in torch, the scale is an fp32 value, unscaling multiplies by the fp32 reciprocal
// (computed in double, rounded once), and a grown scale that would be inf is not taken.
// The state (scale, clean-step counter, totals) goes into every checkpoint's state.json.
#pragma once
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace seqtrain {

class Backend;

struct LossScalerOptions {
  double init = 65536.0;          // 2^16, torch's init_scale
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  // Throws Error naming the runtime.loss_scale.* key when an option is out of range.
  explicit LossScaler(const LossScalerOptions& options);

  float scale() const { return scale_; }

  // One fused pass at the accumulation boundary: g[i] *= 1/scale, and whether every unscaled
  // value is finite. The caller skips the optimizer step when it returns false.
  bool unscale(float* g, size_t n) const;
  // The same on `backend`'s gradient buffer: the one-pass loop above where the backend's memory
  // is host memory, otherwise its scale() then a finiteness test of its l2_norm() (the norm of
  // finite floats, summed in double, is finite; any inf or NaN makes it inf or NaN), so the
  // gradients never leave the device.
  bool unscale(Backend& backend, float* g, size_t n) const;

  // GradScaler.update() after a step whose gradients were (found_inf) or were not finite.
  void update(bool found_inf);

  int64_t growth_tracker() const { return growth_tracker_; }  // consecutive clean steps
  int64_t skipped_total() const { return skipped_; }           // steps skipped since the run began
  int64_t steps_total() const { return steps_; }               // update() calls since the run began
  // Steps skipped since the previous call (for metrics records; the mark is in the state too, so
  // a record spanning a resume still counts every skip once).
  int64_t take_skipped_since_report() {
    const int64_t n = skipped_ - reported_;
    reported_ = skipped_;
    return n;
  }

  nlohmann::json to_json() const;
  // Restores to_json()'s state; throws Error naming the checkpoint field when it is malformed.
  void load_json(const nlohmann::json& j);

 private:
  // 1/scale computed in double and rounded once, as torch's unscale.
  float inverse() const { return static_cast<float>(1.0 / static_cast<double>(scale_)); }
  LossScalerOptions opts_;
  float scale_;
  int64_t growth_tracker_ = 0, skipped_ = 0, steps_ = 0, reported_ = 0;
};

}  // namespace seqtrain
