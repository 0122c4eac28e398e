// ReferenceBackend: the Backend seam implemented as the plainest loops that are still right:
// fp32 storage, fp64 accumulation in every GEMM, reduction and norm, the recurrent layer as a
// loop over time steps written straight from PyTorch's LSTM/GRU equations. No oneDNN, no
// threads, no tuning. It exists to be the oracle: the CPU backend's kernels, and the CUDA
// backend after them, are tested against it (tests/test_backend.cpp). Anything it does not do
// (16-bit GEMMs, mixed-precision or checkpointed recurrent layers) is a seqtrain::Error naming
// the operation, never a quiet fallback to another path.
#pragma once
#include "backend/backend.h"

namespace seqtrain {

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
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
