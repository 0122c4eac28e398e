// AdamWScalars: the per-step scalars of torch's AdamW update as the kernels take them, formed by
// adamw_scalars_at() in double and rounded to float once, as torch does when a Python float
// meets a float32 tensor, so that every backend's kernel starts from the same floats.
// AdamWDeviceStep: one update's step where a captured or loss-scaled step keeps it, in the
// backend's memory: the host uploads the hyperparameters and its count of the update, the
// backend's adamw_prepare forms t and the scalars there (a step skipped on an fp16 overflow, which
// only the device knows of, must not advance t). Plain structs: CUDA kernels take them as they are.
#pragma once
#include <cmath>

#include "core/host_device.h"

namespace seqtrain {

struct AdamWScalars {
  float decay = 1.f;  // 1 - lr * weight_decay for a decaying run, 1 for the others
  float b1 = 0.f, one_minus_b1 = 1.f, b2 = 0.f, one_minus_b2 = 1.f;
  float bc2_sqrt = 1.f;       // sqrt(1 - beta2^t)
  float eps = 0.f;
  float neg_step_size = 0.f;  // -lr / (1 - beta1^t)
};

struct AdamWDeviceStep {
  // Uploaded by the host before each step (Optimizer::prepare).
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  // The update's t as the host counts it, plus the device's skip count when the host last read it.
  double step = 1;
  // Written by adamw_prepare: t = step minus the skips counted since, and its scalars.
  double t = 1;
  AdamWScalars s;
};

// The functions have internal linkage: the per-ISA kernel files include this header (through
// backend/cpu/cpu_kernels.h), and each must keep its own copy (backend/cpu/kernels/level.h's rule).
namespace {

// The scalars of the update at 1-based step t.
ST_HOST_DEVICE inline AdamWScalars adamw_scalars_at(double lr, double beta1, double beta2, double eps,
                                                    double weight_decay, double t) {
  const double bias_c1 = 1.0 - pow(beta1, t);
  const double bias_c2 = 1.0 - pow(beta2, t);
  AdamWScalars s;
  s.decay = static_cast<float>(1.0 - lr * weight_decay);
  s.b1 = static_cast<float>(beta1);
  s.one_minus_b1 = static_cast<float>(1.0 - beta1);
  s.b2 = static_cast<float>(beta2);
  s.one_minus_b2 = static_cast<float>(1.0 - beta2);
  s.bc2_sqrt = static_cast<float>(sqrt(bias_c2));
  s.eps = static_cast<float>(eps);
  s.neg_step_size = static_cast<float>(-(lr / bias_c1));
  return s;
}

// adamw_prepare's work (every backend's, on its own memory): each step's t and scalars, then the
// skip counted when this step's flag says its gradients overflowed.
ST_HOST_DEVICE inline void adamw_prepare_steps(AdamWDeviceStep* steps, unsigned long count, const float* skip,
                                               double* skips) {
  const double skipped = skips ? *skips : 0.0;
  for (unsigned long i = 0; i < count; ++i) {
    AdamWDeviceStep& d = steps[i];
    d.t = d.step - skipped;
    d.s = adamw_scalars_at(d.lr, d.beta1, d.beta2, d.eps, d.weight_decay, d.t);
  }
  if (skip && skips && *skip != 0.f) *skips = skipped + 1.0;
}

}  // namespace
}  // namespace seqtrain
