// CpuBackend: the production CPU implementation of the Backend seam, over today's kernels
// (dnnl_sgemm, the oneDNN bf16 matmul, the emulated fp16 GEMM, the fused RNN kernels and
// oneDNN's RNN primitive behind CpuRecurrentLayers, the per-ISA AdamW kernel). It adds no
// arithmetic of its own: every result is bit for bit what the layers computed before the seam.
#pragma once
#include "backend/backend.h"

namespace seqtrain {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  bool supports(BackendOp op) const override;
  void gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A, int64_t lda,
            const void* B, int64_t ldb, float beta, float* C, int64_t ldc) override;
  void bias_rows(const float* b, float* y, int64_t rows, int64_t cols) override;
  void bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) override;
  std::unique_ptr<RecurrentLayers> make_recurrent(const RecurrentSpec& spec) override;
  void adamw(const AdamWUpdate& u) override;
  void sgd(const SgdUpdate& u) override;
  double l2_norm(const float* x, size_t n) override;
  void scale(float* x, size_t n, float s) override;
  void fill(float* x, size_t n, float v) override;
  void copy(const float* src, float* dst, size_t n) override;
};

}  // namespace seqtrain
