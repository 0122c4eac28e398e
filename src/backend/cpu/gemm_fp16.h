// IEEE half (fp16) GEMM operands with fp32 accumulation, for runtime.precision: fp16.
//
//   C = op(A) * op(B) (+ C when accumulate), A and B fp16 (raw uint16_t bits), C f32,
//
// with gemm_bf16()'s argument conventions. oneDNN 2.6 has no f16 matmul on a CPU without
// AVX512-FP16 (it refuses to create one on this AVX512-BF16 machine), so the product is
// emulated: the fp16 operands are widened to f32 (exactly: every fp16 value is an f32 value) and
// multiplied by the f32 GEMM. The numerics are fp16's (operands rounded to half, overflow to
// inf, fp32 accumulation, as a GPU's fp16 tensor cores do); the speed is not: the widening adds
// a pass over both operands, so fp16 is slower than fp32 here and bf16 is the fast choice.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace seqtrain {

// f32 -> fp16 with round-to-nearest-even; values beyond the half range become +-inf, tiny ones
// fp16 subnormals or zero, NaN stays (quiet) NaN. n contiguous elements.
void f32_to_fp16(const float* src, uint16_t* dst, int64_t n);
float fp16_to_f32(uint16_t v);
void fp16_to_f32(const uint16_t* src, float* dst, int64_t n);

void gemm_fp16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);

// The 16-bit float format of a mixed-precision layer, and dispatch over it: one code path in the
// fused RNN kernels serves both formats.
enum class HalfType { bf16, fp16 };
// The HalfType of a 16-bit DType (bf16, f16); any other is an Error naming `what`, the operation
// that asked to write it.
HalfType half_type_of(DType t, const char* what);
void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n);
void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n);
void f32_to_half_rows(HalfType t, const float* src, int64_t ld_src, uint16_t* dst, int64_t rows, int64_t cols);
void gemm_half(HalfType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, bool accumulate, float* C, int64_t ldc);

}  // namespace seqtrain
