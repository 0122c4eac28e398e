// The dropout mask (Backend::dropout_forward/_backward) as a pure function of (seed, element
// index): every implementation (backend/cpu's vector kernel, backend/reference's loop, a future
// CUDA kernel, the tests) draws exactly the same mask from it, backward regenerates it instead of
// storing it, and no result depends on the thread count.
//
// The draw is attention dropout's (backend/attention_dropout.h) on a flat index: elements go in
// blocks of kDropoutBlock, each block has a 64-bit key from SplitMix64's finalizer over (seed,
// block), and element j of a block takes attention_bits(key, j), 24 bits from 32-bit integer
// arithmetic that vectorizes on every ISA level. Kept iff those bits >= ceil(p * 2^24): kept
// with probability 1 - p on the 24-bit grid. The block key is salted differently from
// attention's row key, so the two masks never coincide for one seed.
// backend/cpu/kernels/dropout.cpp writes the per-element part on vectors (kernels/vec.h's
// hash_bits): change both together (tests/test_backend_ops.cpp holds the two to one mask).
// Internal linkage, as attention_dropout.h: the per-ISA kernel files include it. Callable from
// CUDA kernels too (ST_HOST_DEVICE, attention_dropout.h).
#pragma once
#include <cstdint>

#include "backend/attention_dropout.h"

namespace seqtrain {
namespace {

constexpr int64_t kDropoutBlock = 4096;  // elements per key (a multiple of every vector width)

ST_HOST_DEVICE inline uint64_t dropout_block_key(uint64_t seed, int64_t block) {
  return attention_mix64(attention_mix64(seed ^ 0xbb67ae8584caa73bULL) + static_cast<uint64_t>(block));
}

ST_HOST_DEVICE inline bool dropout_keep(uint64_t seed, int64_t i, float p) {
  return attention_bits(dropout_block_key(seed, i / kDropoutBlock), i % kDropoutBlock) >=
         attention_keep_threshold(p);
}

// The factor an element is multiplied by when kept: 1 / (1 - p), and 0 for p = 1 (torch gives
// zeros there, not NaN from 1/0).
ST_HOST_DEVICE inline float dropout_scale(float p) { return p < 1.f ? 1.f / (1.f - p) : 0.f; }

}  // namespace
}  // namespace seqtrain
