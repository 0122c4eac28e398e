// Vectors for the per-ISA kernels: a GCC vector type as wide as the level's registers (16 floats
// with AVX-512, 8 with AVX2, 4 for the plain x86-64 build), loads and stores with masked tails,
// and the activation functions of the fused RNN gate passes.
//
// Included only by the kernel files of this folder, which the build compiles once per level with
// ST_ISA_NS naming the level's namespace: everything here has internal linkage, so no copy
// compiled with wider instructions can stand in for another level's at link time.
//
// Why vectors and not a scalar loop under `omp simd`: the vectorizer turned the clamps and the
// "no previous state" conditions into masked operations and blends, which slowed the gate
// passes badly in the machine's slow phases (docs/BENCHMARKS.md). Each level's width is its own
// register width: a 16-float type compiled for AVX2 is split in two and spilled.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/attention_dropout.h"
#include "backend/cpu/kernels/exp_series.h"

#ifndef ST_ISA_NS
#error "backend/cpu/kernels/ files are compiled once per ISA level with ST_ISA_NS set (CMakeLists.txt)"
#endif

namespace seqtrain::ST_ISA_NS {
namespace {

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
#elif defined(__AVX2__)
constexpr int64_t kLanes = 8;
#else
constexpr int64_t kLanes = 4;
#endif

using vf = float __attribute__((vector_size(kLanes * 4)));
using vi = int32_t __attribute__((vector_size(kLanes * 4)));
using vu = uint32_t __attribute__((vector_size(kLanes * 4)));

// Every lane v. Not `vf{} + v`: x + 0 is not x for x = -0 (and traps on a signaling NaN), so
// the compiler must add, and did: a vaddss ahead of every broadcast in the attention
// micro-kernel's inner loop, where a broadcast straight from memory is free.
inline vf splat(float v) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(v);
#elif defined(__AVX2__)
  return _mm256_set1_ps(v);
#else
  return _mm_set1_ps(v);
#endif
}
// {0, 1, ..., kLanes - 1}.
inline vi lane_index() {
  vi k{};
  for (int64_t i = 0; i < kLanes; ++i) k[i] = static_cast<int32_t>(i);
  return k;
}
// The lanes summed (or their max) in lane order: a fixed order, the same on every call.
inline float hsum(vf v) {
  float s = v[0];
  for (int64_t k = 1; k < kLanes; ++k) s += v[k];
  return s;
}
inline float hmax(vf v) {
  float m = v[0];
  for (int64_t k = 1; k < kLanes; ++k) m = v[k] > m ? v[k] : m;
  return m;
}
inline vf vmax(vf a, vf b) { return a > b ? a : b; }
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

#if defined(__AVX2__) && !defined(__AVX512F__)
// Lane k is on when k < w.
inline __m256i lane_mask(int64_t w) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(w)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

// The lanes [j, j + w) of a row, w = kLanes except at the tail of a row whose length is not a
// multiple of it. Full is a template parameter because with a run-time test the compiler merged
// both cases into a copy through the stack (`rep movs`), several times slower.
template <bool Full>
struct Lanes {
  int64_t j, w;
  // Lanes past w are zero.
  vf load(const float* row) const {
    if constexpr (Full) {
      vf v;
      std::memcpy(&v, row + j, sizeof v);  // one unaligned vector load
      return v;
    }
#if defined(__AVX512F__)
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << w) - 1), row + j);
#elif defined(__AVX2__)
    return _mm256_maskload_ps(row + j, lane_mask(w));
#else
    vf v{};
    for (int64_t k = 0; k < w; ++k) v[k] = row[j + k];
    return v;
#endif
  }
  // v with the lanes past w set to `fill` (a full vector as is).
  vf only(vf v, float fill = 0.f) const {
    if constexpr (Full) return v;
    return lane_index() < static_cast<int32_t>(w) ? v : splat(fill);
  }
  void store(float* row, vf v) const {
    if constexpr (Full) {
      std::memcpy(row + j, &v, sizeof v);
      return;
    }
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(row + j, static_cast<__mmask16>((1u << w) - 1), v);
#elif defined(__AVX2__)
    _mm256_maskstore_ps(row + j, lane_mask(w), v);
#else
    for (int64_t k = 0; k < w; ++k) row[j + k] = v[k];
#endif
  }
};

// body(Lanes<true>) over the full vectors of [0, n), then body(Lanes<false>) over the tail.
template <class Body>
inline void for_lanes(int64_t n, Body&& body) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) body(Lanes<true>{j, kLanes});
  if (j < n) body(Lanes<false>{j, n - j});
}

// e^x = 2^n * e^r with n = round(x / ln 2), |r| <= ln2/2, and e^r from a degree-6 Taylor
// polynomial (relative error below 2e-7 on that range).
inline vf exp(vf x) {
#if defined(__AVX512F__)
  // vrndscaleps rounds and vscalefps multiplies by 2^n, saturating to 0 or inf by itself (the
  // zero-masked forms: GCC 12 warns that the plain ones read an uninitialized register).
  const vf n = _mm512_maskz_roundscale_ps(0xffff, x * 1.44269504f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
  // Clamped so that 2^n stays a normal float; adding and subtracting 1.5 * 2^23 rounds to the
  // nearest integer in plain float arithmetic.
  x = x < -87.f ? splat(-87.f) : x;
  x = x > 88.f ? splat(88.f) : x;
  const vf n = (x * 1.44269504f + 12582912.f) - 12582912.f;
#endif
  const vf r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;  // ln 2 split in two
  const vf p = exp_taylor_tail(splat(1.f / 720.f), r);
#if defined(__AVX512F__)
  return _mm512_maskz_scalef_ps(0xffff, p, n);
#else
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
#endif
}

// attention_bits() of backend/attention_dropout.h for the key columns j (one per lane) of the row
// with this 64-bit key: the dropout masks' per-element hash on vectors (the compiler leaves the
// scalar loop scalar).
inline vu hash_bits(vu j, uint64_t key) { return attention_hash(j, key); }

// e^x for x <= 0, any x (-inf and huge negatives included): exp() above needs its argument in
// range on the AVX-512 path, where it does not clamp.
inline vf exp_nonpositive(vf x) { return exp(x < -87.f ? splat(-87.f) : x); }

inline vf sigmoid(vf v) { return 1.f / (1.f + exp(-v)); }
// tanh(v) = 1 - 2 / (e^{2v} + 1): no cancellation for large |v|; near 0 the absolute error
// stays ~1e-7, which is what the gates need.
inline vf tanh(vf v) { return 1.f - 2.f / (exp(2.f * v) + 1.f); }

}  // namespace
}  // namespace seqtrain::ST_ISA_NS
