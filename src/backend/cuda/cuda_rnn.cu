// The kernel of cuda_rnn.h: copy (rounding) or add (widening) a table of blocks in one launch (the recurrent
// layers' weight packing and gradient unpacking; cuda_rnn.cpp builds the tables).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_rnn.h"

namespace seqtrain::cuda {
namespace {

__device__ float widen(float v) { return v; }
__device__ float widen(__half v) { return __half2float(v); }
__device__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class W> __device__ W narrow(float v);
template <> __device__ float narrow<float>(float v) { return v; }
template <> __device__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// blockIdx.y picks the block; the x blocks stride over its elements. W: cuDNN's element type.
template <class W, bool kAdd>
__global__ void move_blocks(RnnBlockTable t) {
  const RnnBlock blk = t.b[blockIdx.y];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < blk.n; i += step) {
    if constexpr (kAdd)
      static_cast<float*>(blk.dst)[i] += widen(static_cast<const W*>(blk.src)[i]);
    else
      static_cast<W*>(blk.dst)[i] = narrow<W>(static_cast<const float*>(blk.src)[i]);
  }
}

template <class W>
void launch(const RnnBlockTable& t, bool add, dim3 grid, int threads, cudaStream_t stream) {
  if (add)
    move_blocks<W, true><<<grid, threads, 0, stream>>>(t);
  else
    move_blocks<W, false><<<grid, threads, 0, stream>>>(t);
}

__global__ void fill_ints(int* p, int n, int v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

}  // namespace

cudaError_t launch_fill_lengths(int* lengths, int n, int value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  fill_ints<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(lengths, n, value);
  return cudaGetLastError();
}

cudaError_t launch_rnn_blocks(const RnnBlockTable& t, bool add, cudaStream_t stream) {
  if (t.count <= 0) return cudaSuccess;
  // The blocks are small (H x C gate matrices); 128 x-blocks of 256 threads cover any of them
  // in a few strides.
  constexpr int kThreads = 256;
  const int64_t want = (t.longest + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(std::clamp<int64_t>(want, 1, 128)), static_cast<unsigned>(t.count));
  // Report this launch's error only: an earlier failed runtime call (a copy refused for a host
  // pointer, already reported by its own check) would otherwise still be pending here.
  (void)cudaGetLastError();
  switch (t.space) {
    case RnnSpaceType::f32: launch<float>(t, add, grid, kThreads, stream); break;
    case RnnSpaceType::f16: launch<__half>(t, add, grid, kThreads, stream); break;
    case RnnSpaceType::bf16: launch<__nv_bfloat16>(t, add, grid, kThreads, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
