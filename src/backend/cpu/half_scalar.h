// Bit-exact scalar conversions between f32 and the 16-bit formats (bf16, IEEE fp16): the tails
// of the kernels' vector loops (kernels/convert.cpp) and single-value conversions elsewhere.
// Round to nearest even; NaN stays (quiet) NaN; fp16 overflows to inf and underflows through its
// subnormals. `static inline`: the per-ISA kernel files include this, and internal linkage keeps
// their copies (compiled with wider instructions) from ever standing in for the plain build's.
#pragma once
#include <cstdint>
#include <cstring>

namespace seqtrain::half_scalar {

static inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

static inline float from_bf16(uint16_t v) {
  const uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint16_t to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  // 65520 is halfway between the largest half (65504) and 2^16: it and anything above round to inf.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  auto round_shift = [](uint32_t m, uint32_t shift) {  // m >> shift, rounded to nearest even
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return r;
  };
  const uint32_t e = a >> 23;
  if (e < 113) {  // below 2^-14: a subnormal half, in units of 2^-24
    const uint32_t shift = 126 - e;
    if (shift >= 25) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    return static_cast<uint16_t>(sign | round_shift((a & 0x7fffffu) | 0x800000u, shift));
  }
  // Normal: the carry of the rounding may run into the exponent, which is the right result.
  return static_cast<uint16_t>(sign | round_shift(((e - 112) << 23) | (a & 0x7fffffu), 13));
}

static inline float from_fp16(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112) << 23) | (m << 13);
  } else {  // zero or subnormal: m * 2^-24, exact in f32
    float f = static_cast<float>(m) * (1.f / 16777216.f);
    return sign ? -f : f;
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace seqtrain::half_scalar
