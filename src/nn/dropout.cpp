// Dropout forward/backward. See dropout.h.
#include "nn/dropout.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace seqtrain {

Dropout::Dropout(float p_) : p(p_) {
  ST_CHECK(p >= 0.f && p <= 1.f && !std::isnan(p), "dropout probability must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x, Arena& arena, bool training, uint64_t seed) {
  shape = x.shape;
  active = training && p > 0.f;
  if (!active) return x;
  ST_CHECK(x.contiguous(), "Dropout: input {} must be contiguous", shape_str(x.shape));
  const int64_t n = x.numel();
  // p = 1 drops everything (torch gives zeros, not NaN from 1/0).
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  // One byte per element: a quarter of an f32 mask's memory traffic in backward.
  mask = static_cast<uint8_t*>(arena.alloc(static_cast<size_t>(n)));
  uint8_t* m = mask;
  const float* xp = x.f32();
  Tensor y = arena.tensor(x.shape);
  float* yp = y.f32();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 4)
  for (int64_t b = 0; b < blocks; ++b) {
    Rng rng(seed, static_cast<uint64_t>(b));
    const int64_t end = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; ++i) {
      // uniform() is in [0, 1): P(u >= p) = 1 - p exactly for the 24-bit grid.
      m[i] = rng.uniform() >= p;
      yp[i] = m[i] ? xp[i] * scale : 0.f;
    }
  }
  return y;
}

Tensor Dropout::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(dy.shape == shape, "Dropout: gradient {} does not match the forward input {}", shape_str(dy.shape),
           shape_str(shape));
  if (!active) return dy;
  ST_CHECK(dy.contiguous(), "Dropout: gradient {} must be contiguous", shape_str(dy.shape));
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const int64_t n = dy.numel();
  const uint8_t* m = mask;
  const float* g = dy.f32();
  Tensor dx = arena.tensor(dy.shape);
  float* d = dx.f32();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) d[i] = m[i] ? g[i] * scale : 0.f;
  return dx;
}

}  // namespace seqtrain
