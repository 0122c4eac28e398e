// The kernels of CudaBackend's activation ops (cuda_seam_ops.cpp): axpy, transpose, the
// regression losses, token ids and the 1-D convolution's columns, as simple grid-stride kernels, and their launchers.
#include <cmath>

#include "backend/cuda/cuda_seam_kernels.h"

namespace seqtrain::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

__global__ void axpy_kernel(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

// y[b, a, c] = x[a, b, c], one thread per element of y.
__global__ void transpose_kernel(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  const int64_t n = A * B * C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, a = (i / C) % A, b = i / (C * A);
    y[i] = x[(a * B + b) * C + c];
  }
}

// cols[r, c*k + j] = x[b, t + j - pad, c] (0 outside [0, T) or at a padded step), one thread per
// element of cols, r = b*T + t.
__global__ void im2col_1d_kernel(const float* x, const unsigned char* mask, float* cols, int64_t B, int64_t T,
                                 int64_t C, int64_t k, int64_t pad) {
  const int64_t n = B * T * C * k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % k, c = (i / k) % C, r = i / (C * k), b = r / T, t = r % T, s = t + j - pad;
    const bool in = s >= 0 && s < T && !(mask && mask[b * T + s]);
    cols[i] = in ? x[(b * T + s) * C + c] : 0.f;
  }
}

// dx[b, s, c] = sum over j ascending of dcols[b*T + s - j + pad, c*k + j] (rows inside [0, T)); 0
// at a padded step. One thread per element of dx: a gather, no atomics.
__global__ void col2im_1d_kernel(const float* dcols, const unsigned char* mask, float* dx, int64_t B, int64_t T,
                                 int64_t C, int64_t k, int64_t pad) {
  const int64_t n = B * T * C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % C, r = i / C, b = r / T, s = r % T;
    float acc = 0.f;
    if (!(mask && mask[r]))
      for (int64_t j = 0; j < k; ++j) {
        const int64_t t = s - j + pad;
        if (t >= 0 && t < T) acc += dcols[(b * T + t) * C * k + c * k + j];
      }
    dx[i] = acc;
  }
}

__device__ double regression_term(int kind, float p, float y, double delta) {
  const double d = double(p) - y;
  if (kind == kRegressionMse) return d * d;
  const double a = fabs(d);
  if (kind == kRegressionMae) return a;
  return a < delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
}

// Per-block double partial sums (a fixed tree: the same order run to run), summed by one block.
__global__ void regression_partials(int kind, const float* p, const float* y, int64_t n, double delta,
                                    double* partials) {
  __shared__ double s[kThreads];
  double acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc += regression_term(kind, p[i], y[i], delta);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void sum_partials(double* partials, int count) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double acc = 0;
  for (int i = 0; i < count; ++i) acc += partials[i];
  partials[0] = acc;
}

__global__ void regression_grad(int kind, const float* p, const float* y, int64_t n, float delta, float k,
                                float* g) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float d = p[i] - y[i];
    if (kind == kRegressionMse) g[i] = 2.f * k * d;
    else if (kind == kRegressionMae) g[i] = d > 0.f ? k : (d < 0.f ? -k : 0.f);
    else g[i] = k * fminf(fmaxf(d, -delta), delta);
  }
}

// ids[i] = x[i]; *first_bad = the smallest index whose value is no id in [0, vocab) (n if none).
template <typename T>
__global__ void token_ids_kernel(const T* x, int64_t* ids, int64_t n, int64_t vocab,
                                 unsigned long long* first_bad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(x[i]);
    if (floor(v) != v || !(v >= 0 && v < static_cast<double>(vocab))) {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
      continue;
    }
    ids[i] = static_cast<int64_t>(v);
  }
}

// BatchNorm: one block of kBnThreads per channel c. Thread i sums rows i, i + kBnThreads, ... in
// order; the block then adds the partials in a fixed tree, so every launch sums alike.
constexpr int kBnThreads = 256;

// The block's total of each thread's v (thread 0's result is every thread's, after the barrier).
__device__ double bn_block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kBnThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__global__ void batch_norm_forward_kernel(BatchNormLaunch a, float* y) {
  __shared__ double shared[kBnThreads];
  const int64_t c = blockIdx.x, C = a.channels;
  float mean, rstd;
  if (a.training) {
    const double n = static_cast<double>(a.count);
    double sum = 0;
    for (int64_t r = threadIdx.x; r < a.rows; r += kBnThreads)
      if (!a.mask || !a.mask[r]) sum += a.x[r * C + c];
    const double mu = bn_block_sum(sum, shared) / n;
    double sq = 0;
    for (int64_t r = threadIdx.x; r < a.rows; r += kBnThreads)
      if (!a.mask || !a.mask[r]) {
        const double d = a.x[r * C + c] - mu;
        sq += d * d;
      }
    const double var = bn_block_sum(sq, shared) / n, m = a.momentum;
    mean = static_cast<float>(mu);
    rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(a.eps)));
    if (threadIdx.x == 0) {
      a.mean[c] = mean;
      a.rstd[c] = rstd;
      a.running_mean[c] = static_cast<float>(m * mu + (1.0 - m) * a.running_mean[c]);
      a.running_var[c] = static_cast<float>(m * var * n / (n - 1.0) + (1.0 - m) * a.running_var[c]);
      if (c == 0) *a.num_batches_tracked += 1.f;
    }
  } else {
    mean = a.running_mean[c];
    rstd = static_cast<float>(1.0 / sqrt(static_cast<double>(a.running_var[c]) + a.eps));
    if (threadIdx.x == 0) {
      a.mean[c] = mean;
      a.rstd[c] = rstd;
    }
  }
  const float w = a.weight[c], b = a.bias[c];
  for (int64_t r = threadIdx.x; r < a.rows; r += kBnThreads)
    y[r * C + c] = a.mask && a.mask[r] ? 0.f : (a.x[r * C + c] - mean) * rstd * w + b;
}

__global__ void batch_norm_backward_kernel(BatchNormLaunch a, const float* dy, float* dx, float* dweight,
                                           float* dbias) {
  __shared__ double shared[kBnThreads];
  const int64_t c = blockIdx.x, C = a.channels;
  const float mean = a.mean[c], rstd = a.rstd[c], w = a.weight[c];
  double s = 0, p = 0;
  for (int64_t r = threadIdx.x; r < a.rows; r += kBnThreads)
    if (!a.mask || !a.mask[r]) {
      const float g = dy[r * C + c], xhat = (a.x[r * C + c] - mean) * rstd;
      s += g;
      p += static_cast<double>(g) * xhat;
    }
  s = bn_block_sum(s, shared);
  p = bn_block_sum(p, shared);
  if (threadIdx.x == 0) {
    if (dweight) dweight[c] += static_cast<float>(p);
    if (dbias) dbias[c] += static_cast<float>(s);
  }
  const double n = static_cast<double>(a.count);
  const float s_mean = a.training ? static_cast<float>(s / n) : 0.f, p_mean = a.training ? static_cast<float>(p / n) : 0.f;
  for (int64_t r = threadIdx.x; r < a.rows; r += kBnThreads) {
    if (a.mask && a.mask[r]) {
      dx[r * C + c] = 0.f;
      continue;
    }
    const float xhat = (a.x[r * C + c] - mean) * rstd;
    dx[r * C + c] = w * rstd * (dy[r * C + c] - s_mean - xhat * p_mean);
  }
}

}  // namespace

int seam_blocks(int64_t n) { return blocks_for(n); }

cudaError_t launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t s) {
  axpy_kernel<<<blocks_for(n), kThreads, 0, s>>>(alpha, x, y, n);
  return cudaGetLastError();
}

cudaError_t launch_transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C, cudaStream_t s) {
  transpose_kernel<<<blocks_for(A * B * C), kThreads, 0, s>>>(x, y, A, B, C);
  return cudaGetLastError();
}

cudaError_t launch_im2col_1d(const float* x, const unsigned char* mask, float* cols, int64_t B, int64_t T, int64_t C,
                             int64_t k, int64_t pad_left, cudaStream_t s) {
  im2col_1d_kernel<<<blocks_for(B * T * C * k), kThreads, 0, s>>>(x, mask, cols, B, T, C, k, pad_left);
  return cudaGetLastError();
}

cudaError_t launch_col2im_1d(const float* dcols, const unsigned char* mask, float* dx, int64_t B, int64_t T,
                             int64_t C, int64_t k, int64_t pad_left, cudaStream_t s) {
  col2im_1d_kernel<<<blocks_for(B * T * C), kThreads, 0, s>>>(dcols, mask, dx, B, T, C, k, pad_left);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm_forward(const BatchNormLaunch& a, float* y, cudaStream_t s) {
  batch_norm_forward_kernel<<<static_cast<unsigned>(a.channels), kBnThreads, 0, s>>>(a, y);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm_backward(const BatchNormLaunch& a, const float* dy, float* dx, float* dweight,
                                       float* dbias, cudaStream_t s) {
  batch_norm_backward_kernel<<<static_cast<unsigned>(a.channels), kBnThreads, 0, s>>>(a, dy, dx, dweight, dbias);
  return cudaGetLastError();
}

cudaError_t launch_regression_sum(int kind, const float* p, const float* y, int64_t n, double delta, double* partials,
                                  cudaStream_t s) {
  const int blocks = blocks_for(n);
  regression_partials<<<blocks, kThreads, 0, s>>>(kind, p, y, n, delta, partials);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  sum_partials<<<1, 1, 0, s>>>(partials, blocks);
  return cudaGetLastError();
}

cudaError_t launch_regression_grad(int kind, const float* p, const float* y, int64_t n, float delta, float k, float* g,
                                   cudaStream_t s) {
  regression_grad<<<blocks_for(n), kThreads, 0, s>>>(kind, p, y, n, delta, k, g);
  return cudaGetLastError();
}

cudaError_t launch_token_ids(bool from_f32, const void* x, int64_t* ids, int64_t n, int64_t vocab,
                             unsigned long long* first_bad, cudaStream_t s) {
  if (from_f32)
    token_ids_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const float*>(x), ids, n, vocab, first_bad);
  else
    token_ids_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const int64_t*>(x), ids, n, vocab, first_bad);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
