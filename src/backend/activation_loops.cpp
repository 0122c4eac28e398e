// The activations as plain loops. See activation_loops.h.
// Derivatives:
//   relu'(x)     = [x > 0]                       (0 at x = 0, as torch)
//   tanh'(x)     = 1 - y^2
//   sigmoid'(x)  = y (1 - y)
//   gelu'(x)     = Phi(x) + x phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi)
//   gelu_tanh'   = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2),  t = tanh(c (x + k x^3)),
//                  c = sqrt(2/pi), k = 0.044715
#include "backend/activation_loops.h"

#include <cmath>

namespace seqtrain {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluK = 0.044715f;
// Below this many elements threads cost more than they save.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void activation_forward_loop(ActKind k, const float* x, float* y, int64_t n) {
  // One switch outside the loops so each loop is a tight, vectorisable body.
  switch (k) {
    case ActKind::relu:
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      break;
    case ActKind::tanh:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
    case ActKind::sigmoid:
      // exp(-x) overflows to inf for very negative x, giving 1/inf = 0: the right limit.
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-x[i]));
      break;
    case ActKind::gelu:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * kInvSqrt2));
      break;
    case ActKind::gelu_tanh:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.f + std::tanh(kSqrt2OverPi * (v + kGeluK * v * v * v)));
      }
      break;
  }
}

void activation_backward_loop(ActKind k, const float* x, const float* y, const float* dy, float* dx, int64_t n) {
  switch (k) {
    case ActKind::relu:
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
      break;
    case ActKind::tanh:
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.f - y[i] * y[i]);
      break;
    case ActKind::sigmoid:
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (1.f - y[i]);
      break;
    case ActKind::gelu:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float cdf = 0.5f * (1.f + std::erf(v * kInvSqrt2));
        const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
        dx[i] = dy[i] * (cdf + v * pdf);
      }
      break;
    case ActKind::gelu_tanh:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float t = std::tanh(kSqrt2OverPi * (v + kGeluK * v * v * v));
        const float dinner = kSqrt2OverPi * (1.f + 3.f * kGeluK * v * v);
        dx[i] = dy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * dinner);
      }
      break;
  }
}

}  // namespace seqtrain
