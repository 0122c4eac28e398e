// gemm: row-major f32 matrix multiply, C = alpha * op(A) * op(B) + beta * C.
// op(A) is [M, K], op(B) is [K, N], C is [M, N]; lda/ldb/ldc are the row strides (in elements)
// of A, B and C as stored (so lda >= K when A is not transposed, lda >= M when it is).
// A thin wrapper over oneDNN's dnnl_sgemm, which is already row-major, JIT-tuned for the CPU and
// multithreaded with OpenMP; we only add argument checks and a readable error when it refuses.
#pragma once
#include <cstdint>

namespace seqtrain {

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The argument checks every GEMM entry (f32 here, bf16 and fp16 operands) shares, `who` naming it
// in the error. Returns false when there is nothing to multiply: M or N is zero (an empty batch,
// a zero-length layer: legal), or K is zero, where C has been set to beta * C (0 when beta is 0,
// whatever C held) since the libraries reject K = 0 on some versions.
bool gemm_has_work(const char* who, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                   float beta, float* C, int64_t ldc);

}  // namespace seqtrain
