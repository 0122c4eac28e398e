// f32 <-> bf16 / fp16 on the device: the integer definitions of backend/cpu/half_scalar.h (round
// to nearest even, NaN kept quiet, fp16 overflow to inf, subnormals), so a value rounded on the
// GPU has the CPU's bits. Shared by the conversions and the kernels that write 16-bit outputs
// directly (activation and LayerNorm half outputs).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace seqtrain::cuda {

__device__ inline uint16_t to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

__device__ inline float from_bf16(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

// m >> shift rounded to nearest even (shift >= 1).
__device__ inline uint32_t round_shift(uint32_t m, uint32_t shift) {
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

__device__ inline uint16_t to_fp16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and above: inf
  const uint32_t e = a >> 23;
  if (e < 113) {  // below 2^-14: a subnormal half in units of 2^-24, or zero
    const uint32_t shift = 126 - e;
    if (shift >= 25) return static_cast<uint16_t>(sign);
    return static_cast<uint16_t>(sign | round_shift((a & 0x7fffffu) | 0x800000u, shift));
  }
  // The rounding's carry may run into the exponent, which is the right result.
  return static_cast<uint16_t>(sign | round_shift(((e - 112) << 23) | (a & 0x7fffffu), 13));
}

__device__ inline float from_fp16(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e != 0) return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
  const float f = static_cast<float>(m) * (1.f / 16777216.f);  // subnormal: exact in f32
  return sign ? -f : f;
}

// Stores v at y[i] as Out: float, or the 16-bit raw bits (kBf16 selects bf16 or fp16).
template <int kOut>  // 0 f32, 1 bf16, 2 fp16
__device__ inline void store_as(void* y, int64_t i, float v) {
  if constexpr (kOut == 0) static_cast<float*>(y)[i] = v;
  else if constexpr (kOut == 1) static_cast<uint16_t*>(y)[i] = to_bf16(v);
  else static_cast<uint16_t*>(y)[i] = to_fp16(v);
}

}  // namespace seqtrain::cuda
