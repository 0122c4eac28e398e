// fp16 conversions and the emulated fp16 GEMM: see gemm_fp16.h.
#include "backend/cpu/gemm_fp16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/half_scalar.h"
#include "core/error.h"

namespace seqtrain {
namespace {


// Widens a stored [rows, cols] fp16 matrix with row stride ld into a dense f32 one.
void widen(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t r = 0; r < rows; ++r) fp16_to_f32(src + r * ld, dst.data() + r * cols, cols);
}

}  // namespace

void f32_to_fp16(const float* src, uint16_t* dst, int64_t n) { cpu_kernels().f32_to_fp16(src, dst, n); }

void f32_to_fp16_rows(const float* src, int64_t ld_src, uint16_t* dst, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t r = 0; r < rows; ++r) f32_to_fp16(src + r * ld_src, dst + r * cols, cols);
}

float fp16_to_f32(uint16_t v) { return half_scalar::from_fp16(v); }

void fp16_to_f32(const uint16_t* src, float* dst, int64_t n) { cpu_kernels().fp16_to_f32(src, dst, n); }

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

void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n) { cpu_kernels().f32_to_half(t, src, dst, n); }

void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n) { cpu_kernels().half_to_f32(t, src, dst, n); }

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
