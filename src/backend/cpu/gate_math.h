// Vector activation functions for the fused RNN gate passes (rnn_fused.cpp): 16 floats at a
// time as a GCC vector type, so that every operation is a plain vector instruction, with
// AVX-512's masked loads and stores for row tails and its rounding/scaling instructions in exp.
//
// Why not a scalar loop under `omp simd`, as before: the vectorizer turned the clamps and the
// "no previous state" conditions into masked operations and blends, and that loop slowed down
// far more than the rest of the step in this machine's slow phases. Written on vectors, W1's
// step went 131.5 -> 125.8 ms in fp32 and 80.1 -> 72.2 in bf16 (bench_step, best of three
// interleaved rounds; docs/BENCHMARKS.md). The vector type is portable: without AVX-512 the
// compiler splits it into narrower registers and the plain-arithmetic paths below are used.
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace seqtrain::gate_math {

using vf = float __attribute__((vector_size(64)));
using vi = int32_t __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline vf splat(float v) { return vf{} + v; }

// The lanes [j, j + w) of a row, w = kLanes except at the tail of a row whose length is not a
// multiple of 16. Full vectors are plain unaligned loads and stores; Full is a template
// parameter because with a run-time test the compiler merged both cases into a copy through
// the stack (`rep movs`), which made the gate passes several times slower.
template <bool Full>
struct Lanes {
  int64_t j, w;
  // Lanes past w are zero.
  vf load(const float* row) const {
#if defined(__AVX512F__)
    if constexpr (Full) return _mm512_loadu_ps(row + j);
    else return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << w) - 1), row + j);
#else
    vf v{};
    std::memcpy(&v, row + j, (Full ? kLanes : w) * sizeof(float));
    return v;
#endif
  }
  void store(float* row, vf v) const {
#if defined(__AVX512F__)
    if constexpr (Full) _mm512_storeu_ps(row + j, v);
    else _mm512_mask_storeu_ps(row + j, static_cast<__mmask16>((1u << w) - 1), v);
#else
    std::memcpy(row + j, &v, (Full ? kLanes : w) * sizeof(float));
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
  vf p = splat(1.f / 720.f);
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
#if defined(__AVX512F__)
  return _mm512_maskz_scalef_ps(0xffff, p, n);
#else
  const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
  vf scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
#endif
}

inline vf sigmoid(vf v) { return 1.f / (1.f + exp(-v)); }
// tanh(v) = 1 - 2 / (e^{2v} + 1): no cancellation for large |v|; near 0 the absolute error
// stays ~1e-7, which is what the gates need.
inline vf tanh(vf v) { return 1.f - 2.f / (exp(2.f * v) + 1.f); }

}  // namespace seqtrain::gate_math
