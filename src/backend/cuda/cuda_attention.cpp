// CudaBackend's self-attention: the argument checks and the mask's constants on the host, the
// FlashAttention-2 kernels of cuda_attention.cu on the stream (asynchronous: nothing comes back).
#include <cstdint>

#include "backend/attention_dropout.h"
#include "backend/cuda/cuda_attention_kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

AttentionLaunch launch_args(const AttentionArgs& a) {
  check_attention_args(a);  // before the limits below read its sizes
  const int64_t D = a.channels / a.heads;
  ST_CHECK(D <= kAttentionMaxHeadDim,
           "attention: head dimension {} (n_embd {} / n_head {}) is above the CUDA kernels' limit of {}", D,
           a.channels, a.heads, kAttentionMaxHeadDim);
  ST_CHECK(a.batch * a.heads <= 65535 && a.seq <= INT32_MAX,
           "attention: batch {} x n_head {} is more than the CUDA kernels' grid takes (65535)", a.batch, a.heads);
  return attention_call(a);
}

}  // namespace

void CudaBackend::attention_forward(const AttentionArgs& a) {
  const AttentionLaunch l = launch_args(a);
  ST_CUDA(launch_attention_forward(l, stream_));
}

void CudaBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  const AttentionLaunch l = launch_args(a);
  ST_CHECK(dy && dqkv, "attention backward: dy and dqkv must be given (null pointer)");
  auto* Di = static_cast<float*>(scratch(sizeof(float) * attention_backward_scratch_floats(l)));
  ST_CUDA(launch_attention_backward(l, dy, dqkv, Di, stream_));
}

}  // namespace seqtrain::cuda
