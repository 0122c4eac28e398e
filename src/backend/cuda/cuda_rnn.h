// The kernels of the CUDA recurrent layers (cuda_rnn.cpp): moving a layer's gate blocks
// between PyTorch's fp32 weight layout and cuDNN's packed weight space (fp32, or fp16 / bf16
// under mixed precision: rounded on the way in, widened on the way out), every block in one
// launch; and a full-length batch's sequence lengths.
// Apart from cuda_rnn.cpp because nvcc cannot compile fmt's compile-time format strings (the
// layers' error messages), so the host code is C++ and only this is CUDA.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace seqtrain::cuda {

// The most blocks one layer has: 2 directions x 2G linLayerIDs (G <= 4) x (matrix + bias).
inline constexpr int kRnnMaxBlocks = 32;

// One block: PyTorch side fp32, cuDNN side of the table's `space` type.
struct RnnBlock {
  const void* src;
  void* dst;
  int64_t n;
};
enum class RnnSpaceType : int { f32 = 0, f16 = 1, bf16 = 2 };
// Passed to the kernel by value (under 1 KiB of parameters), so one launch moves every block.
struct RnnBlockTable {
  RnnBlock b[kRnnMaxBlocks];
  int count;
  int64_t longest;  // the largest n: sizes the grid
  RnnSpaceType space;  // the element type of cuDNN's weight / gradient space
};

// add: dst += widen(src) for every block (gradients from cuDNN's space into PyTorch's fp32
// layout); otherwise dst = round(src) (fp32 weights into cuDNN's space, to nearest even). Queued on `stream`; returns the launch's error (cudaSuccess when none
// or when the table is empty).
cudaError_t launch_rnn_blocks(const RnnBlockTable& t, bool add, cudaStream_t stream);

// lengths[i] = value for i < n (a batch whose samples all run every step). A kernel, not an
// upload, so that a captured step (runtime.cuda_graphs) may set a new batch shape.
cudaError_t launch_fill_lengths(int* lengths, int n, int value, cudaStream_t stream);

}  // namespace seqtrain::cuda
