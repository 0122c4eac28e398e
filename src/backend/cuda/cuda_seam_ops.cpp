// CudaBackend's activation ops (backend.h: axpy, transpose, the regression losses, token ids, the
// 1-D convolution's columns) on
// the kernels of cuda_seam_ops.cu. The two that return a value to the host (the regression loss
// sum, the first bad token id) reduce on the device into scratch and read one scalar back
// through pinned memory, as the other host-returning ops do.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_seam_kernels.h"

namespace seqtrain::cuda {

static_assert(static_cast<int>(RegressionLoss::mse) == kRegressionMse &&
              static_cast<int>(RegressionLoss::mae) == kRegressionMae &&
              static_cast<int>(RegressionLoss::huber) == kRegressionHuber);

void CudaBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  if (n == 0) return;
  ST_CUDA(launch_axpy(alpha, x, y, static_cast<int64_t>(n), stream()));
}

void CudaBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  if (A * B * C == 0) return;
  ST_CUDA(launch_transpose(x, y, A, B, C, stream()));
}

double CudaBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                            float delta) {
  if (n == 0) return 0.0;
  auto* partials = static_cast<double*>(scratch(sizeof(double) * seam_blocks(n)));
  ST_CUDA(launch_regression_sum(static_cast<int>(kind), pred, target, n, delta, partials, stream()));
  auto* host = static_cast<double*>(pinned(sizeof(double)));
  ST_CUDA(cudaMemcpyAsync(host, partials, sizeof(double), cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return *host;
}

void CudaBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                           float delta, float k, float* grad) {
  if (n == 0) return;
  ST_CUDA(launch_regression_grad(static_cast<int>(kind), pred, target, n, delta, k, grad, stream()));
}

int64_t CudaBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  ST_CHECK(from == DType::f32 || from == DType::i64, "token ids: values must be f32 or i64, got {}",
           dtype_name(from));
  if (n == 0) return -1;
  auto* bad = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  auto* host = static_cast<unsigned long long*>(pinned(sizeof(unsigned long long)));
  const auto none = static_cast<unsigned long long>(n);
  *host = none;  // pinned and stream-ordered: the read-back below reuses it after this copy
  ST_CUDA(cudaMemcpyAsync(bad, host, sizeof(none), cudaMemcpyHostToDevice, stream()));
  ST_CUDA(launch_token_ids(from == DType::f32, x, ids, n, vocab, bad, stream()));
  ST_CUDA(cudaMemcpyAsync(host, bad, sizeof(*host), cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return *host == none ? -1 : static_cast<int64_t>(*host);
}

void CudaBackend::im2col_1d(const Conv1dArgs& a, const float* x, float* cols) {
  check_conv1d_args(a);
  ST_CUDA(launch_im2col_1d(x, a.mask, cols, a.batch, a.steps, a.channels, a.kernel, a.pad_left, stream()));
}

void CudaBackend::col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) {
  check_conv1d_args(a);
  ST_CUDA(launch_col2im_1d(dcols, a.mask, dx, a.batch, a.steps, a.channels, a.kernel, a.pad_left, stream()));
}

namespace {
BatchNormLaunch bn_launch(const BatchNormArgs& a) {
  check_batch_norm_args(a);
  return BatchNormLaunch{a.rows, a.channels, a.count, a.eps, a.momentum, a.training, a.x, a.mask, a.weight, a.bias,
                         a.mean, a.rstd, a.running_mean, a.running_var, a.num_batches_tracked};
}
}  // namespace

void CudaBackend::batch_norm_forward(const BatchNormArgs& a, float* y) {
  ST_CUDA(launch_batch_norm_forward(bn_launch(a), y, stream()));
}

void CudaBackend::batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight,
                                      float* dbias) {
  ST_CUDA(launch_batch_norm_backward(bn_launch(a), dy, dx, dweight, dbias, stream()));
}

}  // namespace seqtrain::cuda
