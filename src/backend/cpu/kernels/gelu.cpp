// GELU (exact erf form, torch.nn.GELU()) forward and backward at this level's vector width:
// y = x Phi(x), dx = dy (Phi(x) + x phi(x)), with fast_math.h's branch-free exp and Phi so the
// loops vectorize (libm's erff and expf are scalar calls; they made GELU a fifth of a GPT step).
#include "backend/cpu/kernels/fast_math.h"
#include "backend/cpu/kernels/level.h"

namespace seqtrain::ST_ISA_NS {

namespace {
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr int64_t kParallelMin = 1 << 15;  // below this many elements threads cost more than they save
}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    dx[i] = dy[i] * (normal_cdf(v) + v * kInvSqrt2Pi * exp_approx(-0.5f * v * v));
  }
}

}  // namespace seqtrain::ST_ISA_NS
