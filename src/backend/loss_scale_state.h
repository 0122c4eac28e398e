// LossScaleState: fp16's dynamic loss scale as it lives in a backend's memory, and GradScaler's
// update rule over it (torch's _amp_update_scale_), so a step decides its overflow, its skip and
// the next scale where the gradients are, and the host reads none of it until a log interval or
// a checkpoint (optim/loss_scaler.h owns one). A plain struct: CUDA kernels take it as it is.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace seqtrain {

struct LossScaleState {
  float scale = 65536.f;
  float found_inf = 0.f;        // the last unscale's: 1 when an unscaled gradient was inf or NaN
  int64_t growth_tracker = 0;   // consecutive clean steps
  int64_t skipped = 0;          // steps skipped since the run began
  int64_t steps = 0;            // updates since the run began
};

// runtime.loss_scale's constants (baked into a captured step: they never change in a run).
struct LossScaleRule {
  double growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// The functions have internal linkage, as backend/adamw_scalars.h's (per-ISA kernel files may
// include this header through backend.h).
namespace {

// One update after an unscale: on inf the scale backs off and the tracker resets; otherwise the
// tracker counts up and at growth_interval the scale grows (unless the grown float is inf) and
// the tracker resets. The products in double, rounded to the float scale once, as torch.
ST_HOST_DEVICE inline void update_loss_scale_state(LossScaleState& s, const LossScaleRule& r) {
  ++s.steps;
  if (s.found_inf != 0.f) {
    s.scale = static_cast<float>(static_cast<double>(s.scale) * r.backoff_factor);
    s.growth_tracker = 0;
    ++s.skipped;
    return;
  }
  if (++s.growth_tracker == r.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(s.scale) * r.growth_factor);
    // A float that overflowed is inf; x - x is 0 only for a finite x (no <cmath> in kernels).
    if (grown - grown == 0.f) s.scale = grown;
    s.growth_tracker = 0;
  }
}

// 1/scale computed in double and rounded once, as torch's unscale.
ST_HOST_DEVICE inline float inverse_loss_scale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

}  // namespace
}  // namespace seqtrain
