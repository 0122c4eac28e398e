#include "optim/clip.h"

#include <cmath>

#include "backend/backend.h"
#include "backend/clip_rule.h"
#include "core/error.h"

namespace seqtrain {

double grad_norm(Backend& backend, const float* g, size_t n) { return backend.l2_norm(g, n); }

double clip_grad_norm(Backend& backend, float* g, size_t n, double max_norm) {
  ST_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "gradient clipping max_norm = {} is invalid; use a finite value > 0, or turn clipping off", max_norm);
  const double total = backend.l2_norm(g, n);
  const double coef = clip_coefficient(total, max_norm);
  if (coef < 1.0) backend.scale(g, n, static_cast<float>(coef));
  return total;
}

void scale_grads(Backend& backend, float* g, size_t n, float s) { backend.scale(g, n, s); }

double grad_norm(const float* g, size_t n) { return grad_norm(default_backend(), g, n); }
double clip_grad_norm(float* g, size_t n, double max_norm) { return clip_grad_norm(default_backend(), g, n, max_norm); }
void scale_grads(float* g, size_t n, float s) { scale_grads(default_backend(), g, n, s); }

}  // namespace seqtrain
