// The attention-dropout mask as a pure function of (seed, batch, head, query row i, key j): every
// attention implementation (backend/cpu's flash kernels, backend/reference's naive loops, a
// future CUDA kernel, the tests) draws exactly the same mask from it. Being counter-based (a
// hash, no generator state), a kernel can regenerate any tile's mask in any order: backward
// recomputes forward's mask instead of storing a [B, H, T, T] one, and no result depends on the
// thread count or the tile sizes.
//
// The draw: a 64-bit key per row from SplitMix64's finalizer over (seed, b, h, i), then 24 bits
// per key column j from murmur3's 32-bit finalizer of (j * golden ratio ^ low half of the key),
// xored with the key's high half. 32-bit integer arithmetic per element, so the per-column part
// vectorizes on every ISA level. An element is kept when its 24 bits >= ceil(p * 2^24): kept
// with probability 1 - p on the 24-bit grid, as nn/dropout.h's uniform() >= p.
//
// The CPU kernels hash a vector of columns at once through the same attention_hash template.
// Everything has internal linkage (an unnamed namespace): the per-ISA kernel files include this
// header, and each must keep its own copy (backend/cpu/kernels/level.h's rule).
//
// ST_HOST_DEVICE marks the functions callable from CUDA kernels too (backend/cuda draws the same
// mask on the GPU); for the plain C++ compiler it is empty.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace seqtrain {
namespace {

ST_HOST_DEVICE inline uint64_t attention_mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

ST_HOST_DEVICE inline uint64_t attention_row_key(uint64_t seed, int64_t b, int64_t h, int64_t i) {
  uint64_t k = attention_mix64(seed ^ 0x6a09e667f3bcc909ULL);
  k = attention_mix64(k + static_cast<uint64_t>(b));
  k = attention_mix64(k + static_cast<uint64_t>(h));
  return attention_mix64(k + static_cast<uint64_t>(i));
}

// 24 random bits for key column j of the row with this key. U is uint32_t, or a GCC vector of
// them (the CPU kernels hash a vector of key columns at once: vec.h's hash_bits), so every
// implementation computes the one definition.
template <class U>
ST_HOST_DEVICE inline U attention_hash(U j, uint64_t row_key) {
  U x = (j * 0x9e3779b9u) ^ static_cast<uint32_t>(row_key);
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return (x ^ static_cast<uint32_t>(row_key >> 32)) >> 8;
}
ST_HOST_DEVICE inline uint32_t attention_bits(uint64_t row_key, int64_t j) {
  return attention_hash(static_cast<uint32_t>(j), row_key);
}

// Kept iff attention_bits(...) >= this; p = 0 keeps everything, p = 1 nothing.
ST_HOST_DEVICE inline uint32_t attention_keep_threshold(float p) {
  return static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}

ST_HOST_DEVICE inline bool attention_keep(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t j, float p) {
  return attention_bits(attention_row_key(seed, b, h, i), j) >= attention_keep_threshold(p);
}

}  // namespace
}  // namespace seqtrain
