// The row kernels of the GEMM attention path (cuda_attention_gemm.cu), called by CudaBackend's
// attention members (cuda_attention.cpp), which run the products between them as cuBLASLt
// strided-batched GEMMs. Plain structs only, for the reason cuda_rows_kernels.h gives (nvcc
// cannot compile the fmt headers behind backend.h).
//
// Layout of the scratch the host carves (one region per pointer below): per head bh = b * H + h
// (B * H of them, each a batch of the GEMMs), "row matrices" [T, Dp] and "score matrices"
// [T, Tp], with Dp = D and Tp = T rounded up to kAttentionGemmPad so that every row and every
// head starts 16-byte aligned whatever D and T are (cuBLASLt's tensor-core kernels want that for
// bf16 operands; the test shapes have D 5 and T 37). The extra head columns of q, k, v and dy
// are written as zeros, so they add nothing to the products; the extra score columns are never
// written or read (the GEMMs' sizes are T).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/attention_call.h"

namespace seqtrain::cuda {

constexpr int64_t kAttentionGemmPad = 8;

struct AttentionGemmBuffers {
  int64_t Dp = 0, Tp = 0;
  // GEMM operands, [B*H, T, Dp]: bf16 bits (uint16_t) when the call is bf16, else fp32.
  void *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  // GEMM outputs, fp32 [B*H, T, Tp]: S = q k^T and, in backward, dP = dy v^T.
  float *s = nullptr, *dp = nullptr;
  // GEMM operands, [B*H, T, Tp] in the operand type: the dropped probabilities and dS.
  void *p = nullptr, *ds = nullptr;
  // GEMM outputs, fp32 [B*H, T, Dp]: y in forward (out[0]); dq, dk, dv in backward.
  float* out[3] = {nullptr, nullptr, nullptr};
  float* di = nullptr;  // backward's D_i = rowsum(dy_i * y_i), [B*H*T]
};

// q, k, v of qkv [B, T, 3C] into g.q, g.k, g.v (rounded to bf16 when a.bf16).
cudaError_t launch_attention_gemm_pack_qkv(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s);
// The softmax of g.s's rows: writes a.lse and the dropped probabilities g.p.
cudaError_t launch_attention_gemm_softmax(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s);
// g.out[0] (P V per head) interleaved into a.y [B, T, C].
cudaError_t launch_attention_gemm_store_y(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s);
// dy [B, T, C] into g.dy (rounded when a.bf16) and g.di from the unrounded dy and a.y.
cudaError_t launch_attention_gemm_pack_dy(const AttentionCall& a, const float* dy, const AttentionGemmBuffers& g,
                                          cudaStream_t s);
// From g.s, g.dp, a.lse and g.di: the dropped probabilities into g.p and dS into g.ds.
cudaError_t launch_attention_gemm_score_grads(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s);
// g.out[0..2] (dq, dk, dv per head) interleaved into dqkv [B, T, 3C], overwriting it.
cudaError_t launch_attention_gemm_store_dqkv(const AttentionCall& a, const AttentionGemmBuffers& g, float* dqkv,
                                             cudaStream_t s);

}  // namespace seqtrain::cuda
