// CpuBackend's activation ops (backend.h): backend/seam_loops.h's loops, the elementwise ones threaded.
#include "backend/cpu/cpu_backend.h"
#include "backend/seam_loops.h"

namespace seqtrain {

void CpuBackend::axpy(float alpha, const float* x, float* y, size_t n) { axpy_loop(alpha, x, y, n, true); }

void CpuBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  transpose_loop(x, y, A, B, C, true);
}

double CpuBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                       float delta) {
  return regression_sum_loop(kind, pred, target, n, delta);
}

void CpuBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                      float delta, float k, float* grad) {
  regression_grad_loop(kind, pred, target, n, delta, k, grad);
}

int64_t CpuBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  return token_ids_loop(from, x, ids, n, vocab);
}

}  // namespace seqtrain
