// CpuBackend: the production CPU implementation of the Backend seam, over today's kernels
// (dnnl_sgemm, the oneDNN bf16 matmul, the emulated fp16 GEMM, the fused RNN kernels and
// oneDNN's RNN primitive behind CpuRecurrentLayers, the per-ISA AdamW, attention, GELU and
// row-wise kernels: cross-entropy, LayerNorm, embedding, dropout in cpu_backend_rows.cpp).
#pragma once
#include "backend/backend.h"

namespace seqtrain {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  SEQTRAIN_BACKEND_OPERATIONS
};

}  // namespace seqtrain
