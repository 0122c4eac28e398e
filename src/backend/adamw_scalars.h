// AdamWScalars: the per-step scalars of torch's AdamW update as the kernels take them, formed by
// adamw_scalars() (backend.h) in double and rounded to float once, as torch does when a Python
// float meets a float32 tensor, so that every backend's kernel starts from the same floats. A
// plain struct with no includes: the CUDA kernels (compiled by nvcc) take it as it is.
#pragma once

namespace seqtrain {

struct AdamWScalars {
  float decay = 1.f;  // 1 - lr * weight_decay for a decaying run, 1 for the others
  float b1 = 0.f, one_minus_b1 = 1.f, b2 = 0.f, one_minus_b2 = 1.f;
  float bc2_sqrt = 1.f;       // sqrt(1 - beta2^t)
  float eps = 0.f;
  float neg_step_size = 0.f;  // -lr / (1 - beta1^t)
};

}  // namespace seqtrain
