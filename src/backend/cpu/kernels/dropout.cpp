// Dropout's map y = keep(seed, i) ? x * scale : 0 (backend.h's dropout op; the mask is
// backend/dropout_mask.h's) at this level's vector width: each block of kDropoutBlock elements
// takes its 64-bit key once, then every lane hashes its own index (vec.h's hash_bits). Forward
// runs it on x and backward on dy with the same seed, so no mask is stored. Blocks are the unit
// of work for the threads; the mask is the same whatever their count.
#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"
#include "backend/dropout_mask.h"

namespace seqtrain::ST_ISA_NS {
namespace {
constexpr int64_t kParallelMin = 1 << 15;  // elements; below it one thread (a team costs more)
}  // namespace

void dropout(const DropoutKernelArgs& a) {
  const int64_t blocks = (a.n + kDropoutBlock - 1) / kDropoutBlock;
  const vu lanes = __builtin_convertvector(lane_index(), vu);
#pragma omp parallel for schedule(static) if (a.n >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t key = dropout_block_key(a.seed, b);
    const int64_t i0 = b * kDropoutBlock;
    const float* x = a.x + i0;
    float* y = a.y + i0;
    for_lanes(imin(kDropoutBlock, a.n - i0), [&](auto l) {
      const vu bits = hash_bits(lanes + static_cast<uint32_t>(l.j), key);
      l.store(y, bits >= a.keep_threshold ? l.load(x) * a.scale : splat(0.f));
    });
  }
}

}  // namespace seqtrain::ST_ISA_NS
