// gemm over dnnl_sgemm: see gemm.h.
#include "backend/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "backend/cpu/isa.h"
#include "core/error.h"

namespace seqtrain {

bool gemm_has_work(const char* who, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                   float beta, float* C, int64_t ldc) {
  ST_CHECK(M >= 0 && N >= 0 && K >= 0, "{}: negative size M={} N={} K={}", who, M, N, K);
  if (M == 0 || N == 0) return false;
  ST_CHECK(ldc >= N, "{}: ldc={} is smaller than N={}", who, ldc, N);
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return false;
  }
  // Stored column counts: A is [M, K] or, transposed, [K, M]; likewise B.
  const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
  ST_CHECK(lda >= a_cols, "{}: lda={} is smaller than the {} columns of A (ta={})", who, lda, a_cols, ta);
  ST_CHECK(ldb >= b_cols, "{}: ldb={} is smaller than the {} columns of B (tb={})", who, ldb, b_cols, tb);
  return true;
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!gemm_has_work("gemm", ta, tb, M, N, K, lda, ldb, beta, C, ldc)) return;
  static const Isa isa = active_isa();  // caps oneDNN's ISA before its first kernel (isa.h)
  (void)isa;
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  ST_CHECK(st == dnnl_success, "gemm: dnnl_sgemm(M={}, N={}, K={}, lda={}, ldb={}, ldc={}) failed: {}", M, N, K,
           lda, ldb, ldc, dnnl_status2str(st));
}

}  // namespace seqtrain
