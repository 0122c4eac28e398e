// exp and the normal CDF as branch-free code for a float or a GCC float vector (V), so GELU's
// kernel runs them on its level's vectors (vec.h's vf) and the tests check the same formulas on
// scalars: the libm erff and expf they replace are scalar calls and made GELU a fifth of a GPT
// training step (perf, CPU recipe). Both keep float accuracy in *relative* terms over the whole
// range, which matters for GELU's far negative tail, where 1 + erf(x) is tiny and an
// absolute-error approximation would be wrong by orders of magnitude.
// Plain multiply-adds, not std::fma: at the plain level fmaf is a library call, and at the others
// the compiler contracts them into FMAs anyway.
// The functions sit in an anonymous namespace, as vec.h's helpers do (level.h's rules): every
// level's file, and a test, gets its own copy, never another level's.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/kernels/exp_series.h"

namespace seqtrain {
namespace {

// The unsigned 32-bit integers as wide as V, for its bits.
template <class V>
struct BitsOf {
  typedef uint32_t type __attribute__((vector_size(sizeof(V))));
};
template <>
struct BitsOf<float> {
  using type = uint32_t;
};

template <class V>
inline V abs_of(V x) {
  using U = typename BitsOf<V>::type;
  return __builtin_bit_cast(V, __builtin_bit_cast(U, x) & 0x7fffffffu);
}

// e^x, relative error below 3e-7 for x in [-87, 88] (clamped outside: no inf, no denormals).
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so r is exact), e^r by its degree-7 Taylor
// polynomial (remainder < 1e-8 there), 2^n from the exponent bits. kBelow88: the caller knows
// x <= 88 (Phi's -x^2/2 is never positive), and the upper clamp, two vector operations, goes.
template <bool kBelow88 = false, class V>
inline V exp_approx(V x) {
  using U = typename BitsOf<V>::type;
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    // AVX-512 rounds (vrndscaleps) and scales by 2^n (vscalefps) in one instruction each: four
    // fewer than below, 8% of GELU. Same n, same r, and scaling by 2^n is exact in the range the
    // clamp keeps, so the result is the portable path's to the bit. max/min with the bound
    // first, as the selects below: a NaN passes through. (The zero-masked forms throughout:
    // GCC 12 warns that the plain ones read an uninitialized register.)
    x = _mm512_maskz_max_ps(0xffff, _mm512_set1_ps(-87.f), x);
    if (!kBelow88) x = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(88.f), x);
    const V n = _mm512_maskz_roundscale_ps(0xffff, x * 1.44269504f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = n * -0.693145751953125f + x;
    r = n * -1.428606765330187e-06f + r;
    const V p = exp_taylor_tail(r * (1.f / 5040.f) + 1.f / 720.f, r);
    return _mm512_maskz_scalef_ps(0xffff, p, n);
  }
#endif
  x = x < -87.0f ? -87.0f : x;
  if (!kBelow88) x = x > 88.0f ? 88.0f : x;
  // Adding 1.5 * 2^23 rounds x / ln2 to the nearest integer n and leaves n in the low bits of k
  // (k's exponent bits shift out below, so 2^n takes no float-to-int conversion).
  const V k = x * 1.44269504f + 12582912.f;
  const V n = k - 12582912.f;
  V r = n * -0.693145751953125f + x;
  r = n * -1.428606765330187e-06f + r;
  const V p = exp_taylor_tail(r * (1.f / 5040.f) + 1.f / 720.f, r);
  // (0x4b400000 + n + 127) << 23 == (n + 127) << 23 modulo 2^32: 2^n's float bits. The builtin,
  // not std::bit_cast: an unoptimised build emits std::bit_cast as a weak function that every
  // level's object would share (KernelObjectsShareNoCode), one level's code for all.
  const V scale = __builtin_bit_cast(V, (__builtin_bit_cast(U, k) + 127u) << 23);
  return p * scale;
}

// Phi(-b) e^{b^2/2} for b >= 0 (erfc(a) e^{a^2} / 2 with a = b / sqrt 2, a smooth function that
// falls from 1/2 like 1 / (b sqrt(2 pi))) as t Q(t), t = 1 / (1 + a/2) in (0, 1] (Numerical
// Recipes' t of erfcc), Q the degree-8 polynomial fit to it in relative error over all of t's
// range, below 5e-8 (scripts/fit_normal_tail.py). Any b >= 0 maps inside that range, so there
// is no cut-off. The form e^{-b^2/2} t Q(t), not Numerical Recipes' t e^{-a^2 + P(t)}, lets
// GELU's backward share e^{-b^2/2} between Phi and phi: one exp per element, not two.
template <class V>
inline V normal_tail_scaled(V b) {
  const V t = 1.f / (b * 0.35355339059327376f + 1.f);
  V q = t * -0.029617352411150932f + 0.14271141588687897f;
  q = q * t + -0.24452100694179535f;
  q = q * t + 0.1401396542787552f;
  q = q * t + -0.014112547039985657f;
  q = q * t + 0.10169826447963715f;
  q = q * t + 0.1214580163359642f;
  q = q * t + 0.14120112359523773f;
  q = q * t + 0.14104241132736206f;
  return t * q;
}

// Phi(x) = P(Z <= x), relative error below 2e-6 for |x| <= 6 and below 1e-5 beyond (the float
// rounding of x^2 / 2 near 72). *gauss, when given, gets e^{-x^2/2}, the exp Phi's tail already
// took (phi(x) = it / sqrt(2 pi)), within 1.5e-6 relative for |x| <= 6
// (the rounding of x^2 / 2 near 18).
template <class V>
inline V normal_cdf(V x, V* gauss = nullptr) {
  const V e = exp_approx<true>(x * (x * -0.5f));  // x * -0.5 is exact: one rounding of -x^2/2
  if (gauss) *gauss = e;
  const V tail = e * normal_tail_scaled(abs_of(x));  // Phi(-|x|)
  return x <= 0.f ? tail : 1.f - tail;
}

}  // namespace
}  // namespace seqtrain
