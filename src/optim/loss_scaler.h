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
//
// The state (backend/loss_scale_state.h: scale, found-inf flag, clean-step counter, totals) lives
// in the memory of the backend the gradients are on (use_backend; the CPU's until then), and
// each step's work is queued there, as torch's capturable GradScaler: unscale writes the flag,
// the optimizer and clipping read it there to skip (Optimizer::set_skip_flag), update() moves the
// scale. So a step reads nothing back; the host reads the state at log intervals and
// checkpoints (scale(), skipped_total(), to_json()), one copy each on a device. Every checkpoint's
// state.json holds it.
#pragma once
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "backend/device_buffer.h"
#include "backend/loss_scale_state.h"

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

  // Moves the state into `backend`'s memory (the model's: TrainStep does it); its pointers
  // (found_inf(), the scale) are fixed from then on.
  void use_backend(Backend& backend);
  Backend& backend() const { return *backend_; }

  // ---- a step's work, queued on the backend ----
  // The loss gradient dy[0, n) times the scale.
  void scale_grad(float* dy, size_t n);
  // g *= 1/scale and the found-inf flag set from the result (one pass).
  void unscale(float* g, size_t n);
  // GradScaler.update() from the flag of the last unscale.
  void update();
  // The flag in the backend's memory: nonzero when the last unscale met an inf or NaN.
  const float* found_inf() const;

  // ---- host reads (a copy each on a device backend) ----
  float scale() const { return read().scale; }
  // The flag of the last unscale, read back (a step that decides its skip on the host: SGD,
  // train.zero's collective agreement).
  bool overflowed() const { return read().found_inf != 0.f; }
  int64_t growth_tracker() const { return read().growth_tracker; }  // consecutive clean steps
  int64_t skipped_total() const { return read().skipped; }          // steps skipped since the run began
  int64_t steps_total() const { return read().steps; }              // update() calls since the run began
  // Steps skipped since the previous call (for metrics records; the mark is in the state too, so
  // a record spanning a resume still counts every skip once).
  int64_t take_skipped_since_report() {
    const int64_t skipped = skipped_total();
    const int64_t n = skipped - reported_;
    reported_ = skipped;
    return n;
  }

  // For tests and host-side callers: unscale g (the backend's memory) and say whether every
  // value is finite; update() after setting the flag to found_inf.
  bool unscale_finite(float* g, size_t n) {
    unscale(g, n);
    return !overflowed();
  }
  void update(bool found_inf);

  nlohmann::json to_json() const;
  // Restores to_json()'s state; throws Error naming the checkpoint field when it is malformed.
  void load_json(const nlohmann::json& j);

 private:
  LossScaleState read() const;
  void write(const LossScaleState& s);
  LossScaleState* state() { return reinterpret_cast<LossScaleState*>(buffer_.data()); }
  LossScaleRule rule_;
  Backend* backend_;
  DeviceBuffer buffer_;  // one LossScaleState
  int64_t reported_ = 0;
};

}  // namespace seqtrain
