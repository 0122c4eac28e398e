// The launch functions of the attention kernels (cuda_attention.cu), called by CudaBackend's
// attention members (cuda_attention.cpp); plain structs only, for the reason cuda_rows_kernels.h
// gives (nvcc cannot compile the fmt headers behind backend.h).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/attention_call.h"

namespace seqtrain::cuda {

// The largest head dimension C / H the kernels take: their shared-memory tiles grow with it
// (about 108 KiB per block in backward at 128, within sm_80's and sm_90's opt-in limits).
constexpr int64_t kAttentionMaxHeadDim = 128;

using AttentionLaunch = AttentionCall;  // backend/attention_call.h

cudaError_t launch_attention_forward(const AttentionLaunch& a, cudaStream_t s);
// Floats of scratch backward needs (D_i of every row).
size_t attention_backward_scratch_floats(const AttentionLaunch& a);
cudaError_t launch_attention_backward(const AttentionLaunch& a, const float* dy, float* dqkv, float* scratch,
                                      cudaStream_t s);

}  // namespace seqtrain::cuda
