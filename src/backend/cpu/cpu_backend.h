// CpuBackend: the production CPU implementation of the Backend seam, over today's kernels
// (dnnl_sgemm, the oneDNN bf16 matmul, the emulated fp16 GEMM, the fused RNN kernels and
// oneDNN's RNN primitive behind CpuRecurrentLayers, the per-ISA AdamW kernel). It adds no
// arithmetic of its own: every result is bit for bit what the layers computed before the seam.
#pragma once
#include "backend/backend.h"

namespace seqtrain {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  SEQTRAIN_BACKEND_OPERATIONS
};

}  // namespace seqtrain
