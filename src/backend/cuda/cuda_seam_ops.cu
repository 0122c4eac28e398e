// CudaBackend's activation ops (backend.h: axpy, transpose, the regression losses, token ids):
// simple grid-stride kernels on the backend's stream. The two that return a value to the host
// (the regression loss sum, the first bad token id) reduce on the device into scratch and read
// one scalar back through pinned memory, as the other host-returning ops do.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

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

__device__ double regression_term(RegressionLoss kind, float p, float y, double delta) {
  const double d = double(p) - y;
  if (kind == RegressionLoss::mse) return d * d;
  const double a = fabs(d);
  if (kind == RegressionLoss::mae) return a;
  return a < delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
}

// Per-block double partial sums (a fixed tree: the same order run to run), summed by one block.
__global__ void regression_partials(RegressionLoss kind, const float* p, const float* y, int64_t n, double delta,
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

__global__ void regression_grad(RegressionLoss kind, const float* p, const float* y, int64_t n, float delta, float k,
                                float* g) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float d = p[i] - y[i];
    if (kind == RegressionLoss::mse) g[i] = 2.f * k * d;
    else if (kind == RegressionLoss::mae) g[i] = d > 0.f ? k : (d < 0.f ? -k : 0.f);
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

}  // namespace

void CudaBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  if (n == 0) return;
  const auto len = static_cast<int64_t>(n);
  axpy_kernel<<<blocks_for(len), kThreads, 0, stream()>>>(alpha, x, y, len);
  ST_CUDA_LAUNCHED();
}

void CudaBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  const int64_t n = A * B * C;
  if (n == 0) return;
  transpose_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, A, B, C);
  ST_CUDA_LAUNCHED();
}

double CudaBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                            float delta) {
  if (n == 0) return 0.0;
  const int blocks = blocks_for(n);
  auto* partials = static_cast<double*>(scratch(sizeof(double) * blocks));
  regression_partials<<<blocks, kThreads, 0, stream()>>>(kind, pred, target, n, delta, partials);
  ST_CUDA_LAUNCHED();
  sum_partials<<<1, 1, 0, stream()>>>(partials, blocks);
  ST_CUDA_LAUNCHED();
  auto* host = static_cast<double*>(pinned(sizeof(double)));
  ST_CUDA(cudaMemcpyAsync(host, partials, sizeof(double), cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return *host;
}

void CudaBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                           float delta, float k, float* grad) {
  if (n == 0) return;
  regression_grad<<<blocks_for(n), kThreads, 0, stream()>>>(kind, pred, target, n, delta, k, grad);
  ST_CUDA_LAUNCHED();
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
  if (from == DType::f32)
    token_ids_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(static_cast<const float*>(x), ids, n, vocab, bad);
  else
    token_ids_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(static_cast<const int64_t*>(x), ids, n, vocab, bad);
  ST_CUDA_LAUNCHED();
  ST_CUDA(cudaMemcpyAsync(host, bad, sizeof(*host), cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return *host == none ? -1 : static_cast<int64_t>(*host);
}

}  // namespace seqtrain::cuda
