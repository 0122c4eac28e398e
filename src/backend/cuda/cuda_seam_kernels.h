// Launchers of the activation-op kernels (cuda_seam_ops.cu), for cuda_seam_ops.cpp: plain
// declarations nvcc and g++ both read (no seqtrain headers: nvcc cannot compile fmt's checks).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace seqtrain::cuda {

// RegressionLoss's values (backend.h), as the kernels take them.
inline constexpr int kRegressionMse = 0, kRegressionMae = 1, kRegressionHuber = 2;

// Blocks a launch uses for n elements: the length of launch_regression_sum's partials.
int seam_blocks(int64_t n);
cudaError_t launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t s);  // y += alpha x
// y[b, a, c] = x[a, b, c]
cudaError_t launch_transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C, cudaStream_t s);
// The loss sum in double into partials[0] (partials: seam_blocks(n) doubles of device scratch).
cudaError_t launch_regression_sum(int kind, const float* p, const float* y, int64_t n, double delta, double* partials,
                                  cudaStream_t s);
cudaError_t launch_regression_grad(int kind, const float* p, const float* y, int64_t n, float delta, float k, float* g,
                                   cudaStream_t s);
// ids[i] = x[i] (f32 or i64 values); *first_bad = min(*first_bad, i) for each value that is no
// id in [0, vocab).
cudaError_t launch_token_ids(bool from_f32, const void* x, int64_t* ids, int64_t n, int64_t vocab,
                             unsigned long long* first_bad, cudaStream_t s);

// Backend::im2col_1d / col2im_1d (backend.h's Conv1dArgs, spelled out): cols [B*T, C*k], dx
// [B, T, C]; mask null or [B, T] u8, nonzero = padding.
cudaError_t launch_im2col_1d(const float* x, const unsigned char* mask, float* cols, int64_t B, int64_t T, int64_t C,
                             int64_t k, int64_t pad_left, cudaStream_t s);
cudaError_t launch_col2im_1d(const float* dcols, const unsigned char* mask, float* dx, int64_t B, int64_t T,
                             int64_t C, int64_t k, int64_t pad_left, cudaStream_t s);

// Backend::batch_norm_forward / _backward (backend.h's BatchNormArgs, spelled out): one block per
// channel sums its column over the rows in a fixed order (each thread a fixed stride of rows, then
// a fixed tree), in double, and writes the column's outputs; block 0 counts the batch.
struct BatchNormLaunch {
  int64_t rows, channels, count;
  float eps, momentum;
  bool training;
  const float* x;
  const unsigned char* mask;
  const float *weight, *bias;
  float *mean, *rstd, *running_mean, *running_var, *num_batches_tracked;
};
cudaError_t launch_batch_norm_forward(const BatchNormLaunch& a, float* y, cudaStream_t s);
cudaError_t launch_batch_norm_backward(const BatchNormLaunch& a, const float* dy, float* dx, float* dweight,
                                       float* dbias, cudaStream_t s);

}  // namespace seqtrain::cuda
