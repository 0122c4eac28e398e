// The embedding lookup (backend.h's embedding op) at this level's vector width: forward copies
// (or adds) table rows to the output, backward adds dy rows into the table's gradient.
// Backward's threads split the columns, not the ids: each thread adds every id's slice of
// columns in id order, so repeated ids (every sequence's position rows, common characters) sum
// in the same order as one thread would, without atomics or a sort, and the gradient is the same
// for any thread count. Slices are whole cache lines so no two threads write one.
#include <omp.h>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements; below it one thread (a team costs more)
constexpr int64_t kLineFloats = 16;        // one 64-byte cache line

// dst row += src row over columns [c0, c1), or dst row = src row.
template <bool Add>
inline void row_columns(const float* src, float* dst, int64_t c0, int64_t c1) {
  for_lanes(c1 - c0, [&](auto l) {
    const vf v = l.load(src + c0);
    if constexpr (Add) l.store(dst + c0, l.load(dst + c0) + v);
    else l.store(dst + c0, v);
  });
}

}  // namespace

void embedding_forward(const EmbeddingKernelArgs& a) {
  const int64_t D = a.dim;
#pragma omp parallel for schedule(static) if (a.count * D >= kParallelMin)
  for (int64_t i = 0; i < a.count; ++i) {
    const float* row = a.src + a.ids[i] * D;
    if (a.accumulate) row_columns<true>(row, a.dst + i * D, 0, D);
    else row_columns<false>(row, a.dst + i * D, 0, D);
  }
}

void embedding_backward(const EmbeddingKernelArgs& a) {
  const int64_t D = a.dim;
#pragma omp parallel if (a.count * D >= kParallelMin)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lines = (D + kLineFloats - 1) / kLineFloats, per = (lines + nt - 1) / nt;
    const int64_t c0 = imin(D, t * per * kLineFloats), c1 = imin(D, (t + 1) * per * kLineFloats);
    if (c0 < c1)
      for (int64_t i = 0; i < a.count; ++i) row_columns<true>(a.src + i * D, a.dst + a.ids[i] * D, c0, c1);
  }
}

}  // namespace seqtrain::ST_ISA_NS
