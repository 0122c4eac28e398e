// exp and the normal CDF as branch-free float code, so the loops of the activations that call
// them (GELU's Phi and phi) vectorize: the libm erff and expf they replace are scalar calls and
// made GELU a fifth of a GPT training step (perf, CPU recipe). Both keep float accuracy in
// *relative* terms over the whole range, which matters for GELU's far negative tail, where
// 1 + erf(x) is tiny and an absolute-error approximation would be wrong by orders of magnitude.
// Plain multiply-adds, not std::fma: at the plain level fmaf is a library call that stops
// vectorization, and at the others the compiler contracts them into FMAs anyway. The loops
// also need -fno-trapping-math to if-convert the selects (CMakeLists.txt sets it for gelu.cpp).
// The functions sit in an anonymous namespace, as vec.h's helpers do (level.h's rules): every
// level's file, and a test, gets its own copy, never another level's.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernels/exp_series.h"

namespace seqtrain {
namespace {

// e^x, relative error below 3e-7 for x in [-87, 88] (clamped outside: no inf, no denormals).
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so r is exact), e^r by its degree-7 Taylor
// polynomial (remainder < 1e-8 there), 2^n from the exponent bits.
inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;  // value selects (not std::min/max's references) if-convert
  x = x > 88.0f ? 88.0f : x;
  // n = round(x / ln2), via truncation of a positive value: floor is a libm call without SSE4.1.
  const float n = static_cast<float>(static_cast<int32_t>(x * 1.44269504f + 128.5f)) - 128.f;
  float r = n * -0.693145751953125f + x;
  r = n * -1.428606765330187e-06f + r;
  const float p = exp_taylor_tail(r * (1.f / 5040.f) + 1.f / 720.f, r);
  // The builtin, not std::bit_cast: an unoptimised build emits std::bit_cast as a weak function
  // that every level's object would share (KernelObjectsShareNoCode), one level's code for all.
  const float scale = __builtin_bit_cast(float, (static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

// Phi(x) = P(Z <= x) = erfc(-x / sqrt 2) / 2, relative error below 2e-6 for |x| <= 6 and below
// 1e-5 beyond (the float rounding of -z^2 near -72), taking z = -x / sqrt 2 as rounded to
// float. erfc(z) for z >= 0 is t exp(-z^2 + P(t)), t = 1 / (1 + z/2), with P the degree-9
// Chebyshev fit of Numerical Recipes' erfcc (fractional error < 1.2e-7); for z < 0,
// erfc(z) = 2 - erfc(-z).
inline float normal_cdf(float x) {
  const float z = -x * 0.70710678118654752f;
  const float a = z < 0.f ? -z : z;
  const float t = 1.f / (0.5f * a + 1.f);
  float p = 0.17087277f;
  p = p * t + -0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t + -1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t + -0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t + -1.26551223f;
  const float erfc_a = t * exp_approx(-a * a + p);
  return 0.5f * (z >= 0.f ? erfc_a : 2.f - erfc_a);
}

}  // namespace
}  // namespace seqtrain
