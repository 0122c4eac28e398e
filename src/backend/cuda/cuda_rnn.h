// The one kernel of the CUDA recurrent layers (cuda_rnn.cpp): moving a layer's gate blocks
// between PyTorch's weight layout and cuDNN's packed weight space, every block in one launch.
// Apart from cuda_rnn.cpp because nvcc cannot compile fmt's compile-time format strings (the
// layers' error messages), so the host code is C++ and only this is CUDA.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace seqtrain::cuda {

// The most blocks one layer has: 2 directions x 2G linLayerIDs (G <= 4) x (matrix + bias).
inline constexpr int kRnnMaxBlocks = 32;

struct RnnBlock {
  const float* src;
  float* dst;
  int64_t n;
};
// Passed to the kernel by value (under 1 KiB of parameters), so one launch moves every block.
struct RnnBlockTable {
  RnnBlock b[kRnnMaxBlocks];
  int count;
  int64_t longest;  // the largest n: sizes the grid
};

// add: dst += src for every block (gradients into PyTorch's layout); otherwise dst = src
// (weights into cuDNN's). Queued on `stream`; returns the launch's error (cudaSuccess when none
// or when the table is empty).
cudaError_t launch_rnn_blocks(const RnnBlockTable& t, bool add, cudaStream_t stream);

}  // namespace seqtrain::cuda
