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

float fp16_to_f32(uint16_t v) { return half_scalar::from_fp16(v); }

void fp16_to_f32(const uint16_t* src, float* dst, int64_t n) { cpu_kernels().fp16_to_f32(src, dst, n); }

void gemm_fp16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (!gemm_has_work("gemm_fp16", ta, tb, M, N, K, lda, ldb, accumulate ? 1.f : 0.f, C, ldc)) return;
  // Per thread, reused across calls: the steady-state step allocates nothing.
  thread_local std::vector<float> a32, b32;
  const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
  widen(A, lda, a_rows, a_cols, a32);
  widen(B, ldb, b_rows, b_cols, b32);
  gemm(ta, tb, M, N, K, 1.f, a32.data(), a_cols, b32.data(), b_cols, accumulate ? 1.f : 0.f, C, ldc);
}

HalfType half_type_of(DType t, const char* what) {
  ST_CHECK(t == DType::bf16 || t == DType::f16, "cpu backend: {} writes bf16 or f16, not {}", what, dtype_name(t));
  return t == DType::bf16 ? HalfType::bf16 : HalfType::fp16;
}

void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n) { cpu_kernels().f32_to_half(t, src, dst, n); }

void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n) { cpu_kernels().half_to_f32(t, src, dst, n); }

// Long runs are split over the threads in fixed chunks (each element's rounding is its own, so
// the result does not depend on the split); short ones stay on the calling thread.
void f32_to_half_rows(HalfType t, const float* src, int64_t ld_src, uint16_t* dst, int64_t rows, int64_t cols) {
  if (ld_src == cols) {
    const int64_t n = rows * cols, chunk = 16384;
#pragma omp parallel for if (n >= 65536)
    for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c)
      f32_to_half(t, src + c * chunk, dst + c * chunk, std::min(chunk, n - c * chunk));
    return;
  }
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t r = 0; r < rows; ++r) f32_to_half(t, src + r * ld_src, dst + r * cols, cols);
}

void gemm_half(HalfType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (t == HalfType::fp16) gemm_fp16(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
  else gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

}  // namespace seqtrain
