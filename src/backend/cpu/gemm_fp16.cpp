// fp16 conversions and the emulated fp16 GEMM: see gemm_fp16.h.
#include "backend/cpu/gemm_fp16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "core/error.h"

namespace seqtrain {
namespace {

// Bit-exact scalar conversions, for the tails of the vector loops and for builds without F16C.
uint16_t to_fp16_scalar(float f) {
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

float from_fp16_scalar(uint16_t h) {
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

// Widens a stored [rows, cols] fp16 matrix with row stride ld into a dense f32 one.
void widen(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t r = 0; r < rows; ++r) fp16_to_f32(src + r * ld, dst.data() + r * cols, cols);
}

}  // namespace

void f32_to_fp16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // vcvtps2ph with round-to-nearest-even, like the scalar tail. (The zero-masked forms: GCC 12
  // warns that the unmasked intrinsics read an uninitialized register.)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = to_fp16_scalar(src[i]);
}

void f32_to_fp16_rows(const float* src, int64_t ld_src, uint16_t* dst, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t r = 0; r < rows; ++r) f32_to_fp16(src + r * ld_src, dst + r * cols, cols);
}

float fp16_to_f32(uint16_t v) { return from_fp16_scalar(v); }

void fp16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = from_fp16_scalar(src[i]);
}

void gemm_fp16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  ST_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm_fp16: negative size M={} N={} K={}", M, N, K);
  if (M == 0 || N == 0) return;
  ST_CHECK(ldc >= N, "gemm_fp16: ldc={} is smaller than N={}", ldc, N);
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, N * sizeof(float));
    return;
  }
  ST_CHECK(lda >= (ta ? M : K), "gemm_fp16: lda={} too small (ta={}, M={}, K={})", lda, ta, M, K);
  ST_CHECK(ldb >= (tb ? K : N), "gemm_fp16: ldb={} too small (tb={}, K={}, N={})", ldb, tb, K, N);
  // Per thread, reused across calls: the steady-state step allocates nothing.
  thread_local std::vector<float> a32, b32;
  const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
  widen(A, lda, a_rows, a_cols, a32);
  widen(B, ldb, b_rows, b_cols, b32);
  gemm(ta, tb, M, N, K, 1.f, a32.data(), a_cols, b32.data(), b_cols, accumulate ? 1.f : 0.f, C, ldc);
}

void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n) {
  if (t == HalfType::fp16) f32_to_fp16(src, dst, n);
  else f32_to_bf16(src, dst, n);
}

void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n) {
  if (t == HalfType::fp16) fp16_to_f32(src, dst, n);
  else bf16_to_f32(src, dst, n);
}

void f32_to_half_rows(HalfType t, const float* src, int64_t ld_src, uint16_t* dst, int64_t rows, int64_t cols) {
  if (t == HalfType::fp16) f32_to_fp16_rows(src, ld_src, dst, rows, cols);
  else f32_to_bf16_rows(src, ld_src, dst, rows, cols);
}

void gemm_half(HalfType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (t == HalfType::fp16) gemm_fp16(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  else gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

}  // namespace seqtrain
