// The CUDA backend's elementwise and reduction kernels over flat buffers (launchers declared in
// cuda_core_kernels.h): the 16-bit conversions, Linear's bias broadcast and bias-gradient column
// sums, clipping's sum of squares and scale, fill, the K = 0 GEMM's scaling of C, and the
// activations. Each is one short kernel written to give the reference backend's result:
// conversions bit for bit (the same integer rounding as backend/cpu/half_scalar.h), sums in
// double in an order fixed by the shape alone (no atomics), so a run repeats bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_core_kernels.h"
#include "backend/cuda/cuda_half.cuh"

namespace seqtrain::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill any GPU, never past the grid
// limit; the kernels loop over the rest.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{1} << 16));
}

__device__ int64_t first_index() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

// ---- f32 <-> bf16 / fp16 (cuda_half.cuh) ---------------------------------------------------------

template <bool kBf16>
__global__ void narrow_kernel(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = kBf16 ? to_bf16(src[i]) : to_fp16(src[i]);
}

template <bool kBf16>
__global__ void widen_kernel(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = kBf16 ? from_bf16(src[i]) : from_fp16(src[i]);
}

// ---- bias ---------------------------------------------------------------------------------------

__global__ void bias_rows_kernel(const float* b, float* y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = b[i % cols];
}

// bias_grad in two passes. Pass 1: block (x, y) sums rows [y * chunk, (y + 1) * chunk) of the
// 32 columns starting at 32 x; its kRowLanes thread rows take every kRowLanes-th row (adjacent
// threads read adjacent columns: coalesced), then lane 0 adds the lanes' sums in lane order.
// Pass 2: each column adds its chunks' sums in chunk order onto db. The order depends only on
// (rows, cols), and the sums are in double, as the reference backend's.
constexpr int kColTile = 32, kRowLanes = 8;

// 256 rows a block, more when the grid's y limit (65535) would be passed; a multiple of the
// lanes so every lane reads the same number of rows.
int64_t bias_grad_chunk(int64_t rows) {
  constexpr int64_t kMaxChunks = 65535;
  const int64_t chunk = std::max<int64_t>(256, (rows + kMaxChunks - 1) / kMaxChunks);
  return (chunk + kRowLanes - 1) / kRowLanes * kRowLanes;
}
int64_t bias_grad_chunks(int64_t rows) { return (rows + bias_grad_chunk(rows) - 1) / bias_grad_chunk(rows); }

__global__ void column_partials(const float* dy, double* partial, int64_t rows, int64_t cols, int64_t chunk) {
  __shared__ double lanes[kRowLanes][kColTile];
  const int64_t j = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * chunk, r1 = std::min(rows, r0 + chunk);
  double s = 0.0;
  if (j < cols)
    for (int64_t i = r0 + threadIdx.y; i < r1; i += kRowLanes) s += dy[i * cols + j];
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || j >= cols) return;
  double total = 0.0;
  for (int l = 0; l < kRowLanes; ++l) total += lanes[l][threadIdx.x];
  partial[blockIdx.y * cols + j] = total;
}

__global__ void add_column_partials(const double* partial, float* db, int64_t chunks, int64_t cols) {
  for (int64_t j = first_index(); j < cols; j += grid_stride()) {
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * cols + j];
    db[j] = static_cast<float>(db[j] + s);
  }
}

// ---- L2 norm ------------------------------------------------------------------------------------

// The block's sum of its threads' values, a tree over shared memory in a fixed order; valid in
// thread 0. blockDim.x must be kThreads.
__device__ double block_sum(double v) {
  __shared__ double s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  return s[0];
}

// The partials' count is fixed by n alone (not by the GPU's size), so the same buffer gives the
// same bits on any device.
int64_t squares_blocks(int64_t n) { return std::clamp<int64_t>((n + 4 * kThreads - 1) / (4 * kThreads), 1, 1024); }

// Pass 1: block b's sum of squares over a grid stride; pass 2: one block adds the partials.
// NaN and Inf pass through the sums unchanged (squares are never negative, so no inf - inf).
__global__ void squares_partials(const float* x, double* partial, int64_t n) {
  double s = 0.0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double v = x[i];
    s += v * v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials(const double* partial, int64_t count, double* out) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// ---- scale, fill ----------------------------------------------------------------------------------

// C[i, j] *= v over a rows x cols block with row stride ld (the K = 0 GEMM with beta != 0, 1).
__global__ void scale_block_kernel(float* c, int64_t rows, int64_t cols, int64_t ld, float v) {
  const int64_t n = rows * cols;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float& e = c[(i / cols) * ld + i % cols];
    e = v * e;
  }
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= s;
}

__global__ void fill_kernel(float* x, int64_t n, float v) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = v;
}

// ---- activations: activation_loops.cpp's formulas, in float, with CUDA's erff/tanhf/expf -------

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluK = 0.044715f;

template <ActKind K>
__device__ float act(float x) {
  if constexpr (K == ActKind::relu) return x > 0.f ? x : 0.f;  // NaN -> 0, as the loop's compare
  if constexpr (K == ActKind::tanh) return tanhf(x);
  if constexpr (K == ActKind::sigmoid) return 1.f / (1.f + expf(-x));  // exp overflow: 1/inf = 0
  if constexpr (K == ActKind::gelu) return 0.5f * x * (1.f + erff(x * kInvSqrt2));
  if constexpr (K == ActKind::gelu_tanh) return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kGeluK * x * x * x)));
  return 0.f;
}

// dy * f'(x); ReLU, Tanh and Sigmoid from y, the GELUs from x.
template <ActKind K>
__device__ float act_grad(float x, float y, float dy) {
  if constexpr (K == ActKind::relu) return y > 0.f ? dy : 0.f;
  if constexpr (K == ActKind::tanh) return dy * (1.f - y * y);
  if constexpr (K == ActKind::sigmoid) return dy * y * (1.f - y);
  if constexpr (K == ActKind::gelu) {
    const float cdf = 0.5f * (1.f + erff(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
  if constexpr (K == ActKind::gelu_tanh) {
    const float t = tanhf(kSqrt2OverPi * (x + kGeluK * x * x * x));
    const float dinner = kSqrt2OverPi * (1.f + 3.f * kGeluK * x * x);
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner);
  }
  return 0.f;
}

// kOut: y as f32 (0), or rounded to bf16 (1) / fp16 (2) as it is stored (cuda_half.cuh).
template <ActKind K, int kOut>
__global__ void act_forward_kernel(const float* x, void* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store_as<kOut>(y, i, act<K>(x[i]));
}

// Calls f(std::integral_constant<ActKind, K>) for the run-time kind k: the one switch the
// activation launchers share.
template <class F>
void with_act(ActKind k, F&& f) {
  switch (k) {
    case ActKind::relu: f(std::integral_constant<ActKind, ActKind::relu>{}); break;
    case ActKind::tanh: f(std::integral_constant<ActKind, ActKind::tanh>{}); break;
    case ActKind::sigmoid: f(std::integral_constant<ActKind, ActKind::sigmoid>{}); break;
    case ActKind::gelu: f(std::integral_constant<ActKind, ActKind::gelu>{}); break;
    case ActKind::gelu_tanh: f(std::integral_constant<ActKind, ActKind::gelu_tanh>{}); break;
  }
}

template <int kOut>
cudaError_t act_forward(ActKind k, const float* x, void* y, int64_t n, cudaStream_t s) {
  with_act(k, [&](auto K) { act_forward_kernel<decltype(K)::value, kOut><<<blocks_for(n), kThreads, 0, s>>>(x, y, n); });
  return cudaGetLastError();
}

// x or y may be null when the kind does not read it.
template <ActKind K>
__global__ void act_backward_kernel(const float* x, const float* y, const float* dy, float* dx, int64_t n) {
  constexpr bool kReadsX = K == ActKind::gelu || K == ActKind::gelu_tanh;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    dx[i] = act_grad<K>(kReadsX ? x[i] : 0.f, kReadsX ? 0.f : y[i], dy[i]);
}

}  // namespace

cudaError_t launch_narrow(bool bf16, const float* src, uint16_t* dst, int64_t n, cudaStream_t s) {
  if (bf16) narrow_kernel<true><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  else narrow_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  return cudaGetLastError();
}

cudaError_t launch_widen(bool bf16, const uint16_t* src, float* dst, int64_t n, cudaStream_t s) {
  if (bf16) widen_kernel<true><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  else widen_kernel<false><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n);
  return cudaGetLastError();
}

cudaError_t launch_bias_rows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
  bias_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(b, y, rows, cols);
  return cudaGetLastError();
}

size_t bias_grad_scratch_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(bias_grad_chunks(rows) * cols) * sizeof(double);
}

cudaError_t launch_bias_grad(const float* dy, float* db, int64_t rows, int64_t cols, void* scratch, cudaStream_t s) {
  const int64_t chunk = bias_grad_chunk(rows), chunks = bias_grad_chunks(rows);
  auto* partial = static_cast<double*>(scratch);
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
  column_partials<<<grid, dim3(kColTile, kRowLanes), 0, s>>>(dy, partial, rows, cols, chunk);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  add_column_partials<<<blocks_for(cols), kThreads, 0, s>>>(partial, db, chunks, cols);
  return cudaGetLastError();
}

size_t sum_squares_scratch_bytes(int64_t n) { return static_cast<size_t>(squares_blocks(n) + 1) * sizeof(double); }

double* sum_squares_result(void* scratch, int64_t n) { return static_cast<double*>(scratch) + squares_blocks(n); }

cudaError_t launch_sum_squares(const float* x, int64_t n, void* scratch, cudaStream_t s) {
  const int64_t blocks = squares_blocks(n);
  auto* partial = static_cast<double*>(scratch);
  squares_partials<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(x, partial, n);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  sum_partials<<<1, kThreads, 0, s>>>(partial, blocks, sum_squares_result(scratch, n));
  return cudaGetLastError();
}

cudaError_t launch_scale(float* x, int64_t n, float v, cudaStream_t s) {
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, v);
  return cudaGetLastError();
}

cudaError_t launch_fill(float* x, int64_t n, float v, cudaStream_t s) {
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, v);
  return cudaGetLastError();
}

cudaError_t launch_scale_block(float* c, int64_t rows, int64_t cols, int64_t ld, float v, cudaStream_t s) {
  scale_block_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(c, rows, cols, ld, v);
  return cudaGetLastError();
}

cudaError_t launch_activation_forward_half(ActKind k, const float* x, bool bf16, void* y, int64_t n,
                                          cudaStream_t s) {
  return bf16 ? act_forward<1>(k, x, y, n, s) : act_forward<2>(k, x, y, n, s);
}

cudaError_t launch_activation_forward(ActKind k, const float* x, float* y, int64_t n, cudaStream_t s) {
  return act_forward<0>(k, x, y, n, s);
}

cudaError_t launch_activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                       int64_t n, cudaStream_t s) {
  with_act(k, [&](auto K) {
    act_backward_kernel<decltype(K)::value><<<blocks_for(n), kThreads, 0, s>>>(x, y, dy, dx, n);
  });
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
