// LayerNorm over rows (backend.h's layer_norm op) at this level's vector width, in float.
//   forward   the corrected two-pass moments (Chan, Golub and LeVeque): mu0 = mean(x), then
//             d = x - mu0 summed and squared in one pass: mean = mu0 + mean(d),
//             var = mean(d^2) - mean(d)^2. The second pass cancels the float error of the first
//             mean, and the variance never subtracts two large squares, so a row of large-mean
//             activations keeps its variance (what the double sums this replaced were for).
//             Then y = (x - mean) * rstd * w + b. The row stays in L1 across the passes.
//   backward  dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * w,
//             per row in two passes; dweight and dbias as column sums per block of
//             kLayerNormBlockRows rows (in `partials`), the blocks added in order at the end.
// Threads over rows (forward) and row blocks (backward); no result depends on their count.

#include <omp.h>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements; below it one thread (a team costs more)

// Row r of y into `y` (C floats).
void forward_row(const LayerNormKernelArgs& a, int64_t r, float* y) {
  const int64_t C = a.C;
  const float* x = a.x + r * C;
  const float inv_c = 1.f / static_cast<float>(C);
  vf s = splat(0.f);
  for_lanes(C, [&](auto l) { s += l.load(x); });
  const float mu0 = hsum(s) * inv_c;
  vf s1 = splat(0.f), s2 = splat(0.f);
  for_lanes(C, [&](auto l) {
    const vf d = l.only(l.load(x) - mu0);
    s1 += d;
    s2 += d * d;
  });
  const float md = hsum(s1) * inv_c, var = hsum(s2) * inv_c - md * md;
  const float mu = mu0 + md, rs = 1.f / __builtin_sqrtf((var > 0.f ? var : 0.f) + a.eps);
  a.mean[r] = mu;
  a.rstd[r] = rs;
  if (a.bias)
    for_lanes(C, [&](auto l) { l.store(y, (l.load(x) - mu) * rs * l.load(a.weight) + l.load(a.bias)); });
  else
    for_lanes(C, [&](auto l) { l.store(y, (l.load(x) - mu) * rs * l.load(a.weight)); });
}

// Row r's dx, and its dy * xhat and dy added to the block's column sums pw and pb.
void backward_row(const LayerNormKernelArgs& a, int64_t r, float* pw, float* pb) {
  const int64_t C = a.C;
  const float* x = a.x + r * C;
  const float* g = a.dy + r * C;
  float* dx = a.dx + r * C;
  const float mu = a.mean[r], rs = a.rstd[r];
  vf m1 = splat(0.f), m2 = splat(0.f);
  for_lanes(C, [&](auto l) {  // past the row's end dy loads as 0, so those lanes add nothing
    const vf xhat = (l.load(x) - mu) * rs, dy = l.load(g), dxhat = dy * l.load(a.weight);
    m1 += dxhat;
    m2 += dxhat * xhat;
    l.store(pw, l.load(pw) + dy * xhat);
    l.store(pb, l.load(pb) + dy);
  });
  const float inv_c = 1.f / static_cast<float>(C);
  const float mean1 = hsum(m1) * inv_c, mean2 = hsum(m2) * inv_c;
  for_lanes(C, [&](auto l) {
    const vf xhat = (l.load(x) - mu) * rs;
    l.store(dx, (l.load(g) * l.load(a.weight) - mean1 - xhat * mean2) * rs);
  });
}

// dst[c] += sum over blocks b of src[b * stride + c], the blocks in order.
void add_block_sums(const float* src, int64_t blocks, int64_t stride, int64_t C, float* dst) {
  for_lanes(C, [&](auto l) {
    vf t = l.load(src);
    for (int64_t b = 1; b < blocks; ++b) t += l.load(src + b * stride);
    l.store(dst, l.load(dst) + t);
  });
}

}  // namespace

// With y16, each row is computed into the thread's row of row_work (in L1) and rounded from
// there: the fp32 output never reaches memory.
void layer_norm_forward(const LayerNormKernelArgs& a) {
  if (a.y16 == nullptr) {
#pragma omp parallel for schedule(static) if (a.rows * a.C >= kParallelMin)
    for (int64_t r = 0; r < a.rows; ++r) forward_row(a, r, a.y + r * a.C);
    return;
  }
#pragma omp parallel if (a.rows * a.C >= kParallelMin)
  {
    float* row = a.row_work + omp_get_thread_num() * a.C;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < a.rows; ++r) {
      forward_row(a, r, row);
      ST_ISA_NS::f32_to_half(a.half, row, a.y16 + r * a.C, a.C);
    }
  }
}

void layer_norm_backward(const LayerNormKernelArgs& a) {
  const int64_t C = a.C, nb = (a.rows + kLayerNormBlockRows - 1) / kLayerNormBlockRows;
#pragma omp parallel for schedule(static) if (a.rows * C >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    float* pw = a.partials + b * 2 * C;
    float* pb = pw + C;
    for (int64_t c = 0; c < 2 * C; ++c) pw[c] = 0.f;
    for (int64_t r = b * kLayerNormBlockRows; r < imin(a.rows, (b + 1) * kLayerNormBlockRows); ++r)
      backward_row(a, r, pw, pb);
  }
  add_block_sums(a.partials, nb, 2 * C, C, a.dweight);
  if (a.dbias) add_block_sums(a.partials + C, nb, 2 * C, C, a.dbias);
}

}  // namespace seqtrain::ST_ISA_NS
