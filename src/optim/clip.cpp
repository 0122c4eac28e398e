#include "optim/clip.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "optim/optimizer.h"

namespace seqtrain {

double grad_norm(const float* g, size_t n) {
  const int64_t len = static_cast<int64_t>(n);
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < len; ++i) {
    const double x = g[i];
    sum += x * x;
  }
  return std::sqrt(sum);
}

double clip_grad_norm(float* g, size_t n, double max_norm) {
  ST_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "gradient clipping max_norm = {} is invalid; use a finite value > 0, or turn clipping off", max_norm);
  const double total = grad_norm(g, n);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) scale_grads(g, n, static_cast<float>(coef));
  return total;
}

void scale_grads(float* g, size_t n, float s) {
  const int64_t len = static_cast<int64_t>(n);
#pragma omp parallel for simd if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < len; ++i) g[i] *= s;
}

}  // namespace seqtrain
