// GELU (exact erf form, torch.nn.GELU()) forward and backward at this level's vector width:
// y = x Phi(x), dx = dy (Phi(x) + x phi(x)), with fast_math.h's branch-free exp and Phi on vec.h's
// vectors (libm's erff and expf are scalar calls; they made GELU a fifth of a GPT step). The
// loops are written on vectors, not left to `omp parallel for simd`, which turned the clamps into
// compare-and-blend chains and computed the exp twice in backward; here phi reuses Phi's exp.
#include "backend/cpu/kernels/fast_math.h"
#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {

namespace {
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr int64_t kParallelMin = 1 << 15;  // below this many elements threads cost more than they save
constexpr int64_t kBlock = 1024;           // elements per parallel work item (a multiple of kLanes)

// block(lo, len) for the blocks [lo, lo + len) of kBlock elements that cover [0, n), spread over
// the threads (static schedule: each thread one contiguous range).
template <class Block>
void for_blocks(int64_t n, Block&& block) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) block(b * kBlock, imin(kBlock, n - b * kBlock));
}

// y[0, len) = GELU(x[0, len)).
void gelu_rows(const float* x, float* y, int64_t len) {
  for_lanes(len, [&](auto l) {
    const vf v = l.load(x);
    l.store(y, v * normal_cdf(v));
  });
}
}  // namespace

void gelu_forward(const float* x, float* y, int64_t n) {
  for_blocks(n, [&](int64_t lo, int64_t len) { gelu_rows(x + lo, y + lo, len); });
}

void gelu_forward_half(HalfType t, const float* x, uint16_t* y, int64_t n) {
  for_blocks(n, [&](int64_t lo, int64_t len) {
    alignas(64) float tmp[kBlock];
    gelu_rows(x + lo, tmp, len);
    ST_ISA_NS::f32_to_half(t, tmp, y + lo, len);
  });
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  for_blocks(n, [&](int64_t lo, int64_t len) {
    for_lanes(len, [&](auto l) {
      const vf v = l.load(x + lo);
      vf gauss;
      const vf cdf = normal_cdf(v, &gauss);
      l.store(dx + lo, l.load(dy + lo) * (cdf + v * kInvSqrt2Pi * gauss));
    });
  });
}

}  // namespace seqtrain::ST_ISA_NS
