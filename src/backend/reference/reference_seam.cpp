// ReferenceBackend's activation ops (backend.h): backend/seam_loops.h's loops, serial.
#include "backend/reference/reference_backend.h"
#include "backend/seam_loops.h"

namespace seqtrain {

void ReferenceBackend::axpy(float alpha, const float* x, float* y, size_t n) { axpy_loop(alpha, x, y, n, false); }

void ReferenceBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  transpose_loop(x, y, A, B, C, false);
}

double ReferenceBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                       float delta) {
  return regression_sum_loop(kind, pred, target, n, delta);
}

void ReferenceBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                      float delta, float k, float* grad) {
  regression_grad_loop(kind, pred, target, n, delta, k, grad);
}

int64_t ReferenceBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  return token_ids_loop(from, x, ids, n, vocab);
}

}  // namespace seqtrain
