// CpuBackend: the production CPU implementation of the Backend seam, over today's kernels
// (dnnl_sgemm, the oneDNN bf16 matmul, the emulated fp16 GEMM, the fused RNN kernels and
// oneDNN's RNN primitive behind CpuRecurrentLayers, the per-ISA AdamW, attention, GELU and
// row-wise kernels: cross-entropy, LayerNorm, embedding, dropout in cpu_backend_rows.cpp). It
// adds no arithmetic of its own: every result is bit for bit what the layers computed before
// the seam. Its device memory is host memory (cpu_memory.cpp): 64-byte aligned, page aligned
// when large.
#pragma once
#include "backend/allocation_table.h"
#include "backend/backend.h"

namespace seqtrain {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  SEQTRAIN_BACKEND_OPERATIONS
  SEQTRAIN_BACKEND_MEMORY
  bool host_accessible() const override { return true; }
  const AllocationTable& allocations() const { return allocations_; }

 private:
  AllocationTable allocations_;
};

}  // namespace seqtrain
