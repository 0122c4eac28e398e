// CpuBackend: the production CPU implementation of the Backend seam, over today's kernels
// (dnnl_sgemm, the oneDNN bf16 matmul, the emulated fp16 GEMM, the fused RNN kernels and
// oneDNN's RNN primitive behind CpuRecurrentLayers, the per-ISA AdamW, attention, GELU and
// row-wise kernels: cross-entropy, LayerNorm, embedding, dropout in cpu_backend_rows.cpp). It
// adds no arithmetic of its own: every result is bit for bit what the layers computed before
// the seam. Its device memory is host memory (HostMemoryBackend): 64-byte aligned, page
// aligned when large.
#pragma once
#include "backend/host_memory_backend.h"

namespace seqtrain {

class CpuBackend final : public HostMemoryBackend {
 public:
  std::string_view name() const override { return "cpu"; }
  SEQTRAIN_BACKEND_ROW_AND_LAYER_OPS
  void activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) override;
  void layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) override;
  void dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) override;
  // bf16: the bias added by oneDNN's matmul itself (no seeding pass, no read of C).
  void gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                 const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc) override;

 protected:
  // A cache line (64 bytes, one AVX-512 register: kernels may load aligned, and no buffer shares
  // its first line with another object); from 1 MiB a page, so a large buffer shares no page with
  // the rest of the heap.
  size_t alignment_for(size_t bytes) const override { return bytes >= (size_t{1} << 20) ? 4096 : 64; }
  bool threaded_loops() const override { return true; }
};

}  // namespace seqtrain
