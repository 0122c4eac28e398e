// AttentionCall: one self-attention call (backend.h's AttentionArgs) resolved for a kernel: the
// sizes, the mask flags and the dropout's integer threshold and scale, formed once on the host by
// attention_call() (backend.h), so that the CPU's tiled kernels and the CUDA kernels start from
// the same numbers. A plain struct: nvcc reads it as it is. The kernels take the mask's seed with
// resolve_seed (it may be the step's seed in device memory: backend/dropout_seed.h).
#pragma once
#include <cstdint>

#include "backend/dropout_seed.h"

namespace seqtrain {

struct AttentionCall {
  int64_t B = 0, T = 0, H = 0, C = 0;
  bool bf16 = false;            // round the products' operands to bf16
  bool causal = true;           // false: no causal mask, no tiles skipped for it
  bool dropout = false;         // p > 0: keep where attention_bits() >= keep_threshold
  uint32_t keep_threshold = 0;  // attention_keep_threshold(p)
  float keep_scale = 1.f;       // 1 / (1 - p) (0 when p = 1: zeros, as torch)
  DropoutSeed seed;
  int64_t batch_offset = 0;     // global batch row of row 0 (AttentionArgs::batch_offset)
  const uint8_t* key_padding_mask = nullptr;  // [B, T], nonzero = padding key (backend.h)
  const float* qkv = nullptr;
  float* y = nullptr;
  float* lse = nullptr;
};

}  // namespace seqtrain
