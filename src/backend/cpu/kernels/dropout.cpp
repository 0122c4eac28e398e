// Dropout's map y = keep(seed, i) ? x * scale : 0 (backend.h's dropout op; the mask is
// backend/dropout_mask.h's) at this level's vector width: each block of kDropoutBlock elements
// takes its 64-bit key once, then every lane hashes its own index (vec.h's hash_bits). Forward
// runs it on x and backward on dy with the same seed, so no mask is stored. Blocks are the unit
// of work for the threads; the mask is the same whatever their count.
#include <algorithm>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"
#include "backend/dropout_mask.h"

namespace seqtrain::ST_ISA_NS {
namespace {
constexpr int64_t kParallelMin = 1 << 15;  // elements; below it one thread (a team costs more)
}  // namespace

// Mask elements [first, first + n): the blocks they touch, each from the first of its elements
// in range (`first` need not be block-aligned: a data-parallel shard's rows start anywhere).
void dropout(const DropoutKernelArgs& a) {
  if (a.n <= 0) return;
  const int64_t b0 = a.first / kDropoutBlock, b1 = (a.first + a.n - 1) / kDropoutBlock + 1;
  const vu lanes = __builtin_convertvector(lane_index(), vu);
#pragma omp parallel for schedule(static) if (a.n >= kParallelMin)
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t key = dropout_block_key(a.seed, b);
    const int64_t g0 = std::max(b * kDropoutBlock, a.first), g1 = std::min((b + 1) * kDropoutBlock, a.first + a.n);
    const int64_t j0 = g0 - b * kDropoutBlock;  // the first element's place in its block
    const float* x = a.x + (g0 - a.first);
    float* y = a.y + (g0 - a.first);
    for_lanes(g1 - g0, [&](auto l) {
      const vu bits = hash_bits(lanes + static_cast<uint32_t>(j0 + l.j), key);
      l.store(y, bits >= a.keep_threshold ? l.load(x) * a.scale : splat(0.f));
    });
  }
}

}  // namespace seqtrain::ST_ISA_NS
