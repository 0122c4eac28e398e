// bf16 GEMM with fp32 accumulation and fp32 output, for the mixed-precision RNN kernels.
//
//   C = op(A) * op(B) (+ C when accumulate), A and B bf16 (raw uint16_t bits), C f32,
//
// row-major with the same argument conventions as gemm() in gemm.h (op(A) [M, K], op(B) [K, N],
// lda/ldb/ldc the row strides as stored). It runs as a oneDNN matmul (bf16 src/weights, f32
// dst, a sum post-op for accumulate); oneDNN 2.6's C API has no public bf16 gemm, and on an
// AVX512-BF16 CPU its matmul dispatches to the native bf16 dot-product kernels. One primitive is
// created per (transposes, sizes, strides, accumulate) and cached for the life of the process, so
// the steady-state step creates no oneDNN objects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace seqtrain {

// Whether this CPU runs bf16 dot products natively (AVX512-BF16 or AMX-BF16).
bool cpu_has_native_bf16();

// f32 -> bf16 with round-to-nearest-even (NaN stays NaN), n contiguous elements.
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
float bf16_to_f32(uint16_t v);
// bf16 -> f32 (exact), n contiguous elements.
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

// bias: null, or N floats added to every row of C by the matmul itself (a Linear's bias).
void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc, const float* bias = nullptr);

// How many distinct bf16 matmul primitives have been created (tests check the cache works).
size_t gemm_bf16_primitives_created();
// oneDNN's implementation name for a shape (e.g. "gemm:jit"), for logs and benchmarks.
std::string gemm_bf16_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc);

}  // namespace seqtrain
