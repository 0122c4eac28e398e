// The kernel of cuda_rnn.h: copy or add a table of float blocks in one launch (the recurrent
// layers' weight packing and gradient unpacking; cuda_rnn.cpp builds the tables).
#include <algorithm>

#include "backend/cuda/cuda_rnn.h"

namespace seqtrain::cuda {
namespace {

// blockIdx.y picks the block; the x blocks stride over its elements.
template <bool kAdd>
__global__ void move_blocks(RnnBlockTable t) {
  const RnnBlock blk = t.b[blockIdx.y];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < blk.n; i += step) {
    if constexpr (kAdd)
      blk.dst[i] += blk.src[i];
    else
      blk.dst[i] = blk.src[i];
  }
}

}  // namespace

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
  if (add)
    move_blocks<true><<<grid, kThreads, 0, stream>>>(t);
  else
    move_blocks<false><<<grid, kThreads, 0, stream>>>(t);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
