// The launch functions of the row-wise kernels (cuda_rows.cu), called by CudaBackend's members
// (cuda_rows.cpp). This header is the seam between the two compilers: nvcc 13 cannot compile
// fmt 9's consteval format checks, which every seqtrain header reaches through core/error.h, so
// the .cu side sees only these plain structs and returns cudaError_t, and the host side does the
// checks, the errors and the scratch bookkeeping.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/dropout_seed.h"

namespace seqtrain::cuda {

// A first-bad-row flag's "none" value (kernels lower it with atomicMin to the first bad row).
constexpr unsigned long long kNoBadRow = ~0ull;

struct CrossEntropyLaunch {
  int64_t rows = 0, classes = 0;
  const float* logits = nullptr;
  const int64_t* targets = nullptr;
  int64_t ignore_index = -100;
  float* lse = nullptr;
};
// What cross_entropy_forward's kernels leave in scratch for the host: the bad-row flag and the
// totals, read back together.
struct CrossEntropyResult {
  unsigned long long bad_row;
  unsigned long long pad;
  double loss;
  long long count, correct;
};
// Bytes of scratch cross_entropy_forward needs (the result first, then per-row partials).
size_t cross_entropy_forward_scratch(int64_t rows);
// Resets the flag, runs the rows and the fixed-order total into scratch (a CrossEntropyResult at
// its start).
cudaError_t launch_cross_entropy_forward(const CrossEntropyLaunch& a, void* scratch, cudaStream_t s);
// dlogits overwritten; `flag` reset here and lowered to the first bad target's row.
cudaError_t launch_cross_entropy_backward(const CrossEntropyLaunch& a, float scale, float* dlogits,
                                          unsigned long long* flag, cudaStream_t s);

struct LayerNormLaunch {
  int64_t rows = 0, channels = 0;
  float eps = 1e-5f;
  const float* x = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
};
cudaError_t launch_layer_norm_forward(const LayerNormLaunch& a, float* y, cudaStream_t s);
// The same with y rounded to bf16 (else fp16) as it is written: the bits of the fp32 y narrowed.
cudaError_t launch_layer_norm_forward_half(const LayerNormLaunch& a, bool bf16, void* y, cudaStream_t s);
size_t layer_norm_backward_scratch(int64_t rows, int64_t channels);
cudaError_t launch_layer_norm_backward(const LayerNormLaunch& a, const float* dy, float* dx, float* dweight,
                                       float* dbias, void* scratch, cudaStream_t s);

struct EmbeddingLaunch {
  int64_t rows = 0, dim = 0, count = 0;
  const int64_t* ids = nullptr;
};
// Both reset `flag` and lower it to the position of the first id outside [0, rows).
cudaError_t launch_embedding_forward(const EmbeddingLaunch& a, const float* table, float* y, bool accumulate,
                                     unsigned long long* flag, cudaStream_t s);
// Backward's scratch: the flag first (at its start), then what the small-table kernels list.
size_t embedding_backward_scratch(const EmbeddingLaunch& a);
cudaError_t launch_embedding_backward(const EmbeddingLaunch& a, const float* dy, float* dtable, void* scratch,
                                      cudaStream_t s);

// y[i] = keep(seed, first + i) ? x[i] * scale : 0, keep as dropout_mask.h's dropout_keep at
// threshold (first: Backend::dropout_at's offset of a shard in the global mask).
cudaError_t launch_dropout(const float* x, float* y, int64_t n, DropoutSeed seed, int64_t first, uint32_t threshold,
                           float scale, cudaStream_t s);

}  // namespace seqtrain::cuda
