// Fused LSTM / GRU kernels: seqtrain's own implementation of one RNN layer in one direction,
// working directly on PyTorch's parameter layout (W_ih [G*H, C], W_hh [G*H, H], gate order
// i,f,g,o / r,z,n; GRU linear-before-reset), so nothing is packed or unpacked.
//
// Forward: one large GEMM for the input projection of all T steps, then per step one GEMM
// [N, H] x W_hh^T and a fused elementwise pass for the gates and the state update. The
// per-step GEMMs (forward and backward's dh_prev) run through a RecurrentGemm
// (recurrent_gemm.h) when the caller passes one: W_hh is packed once per pass instead of by
// every one of the T calls, which at small batch is most of the step's GEMM time.
// Backward: per step the fused elementwise gate gradients (which also sum the bias gradients)
// and one GEMM for dh_prev; every chunk of steps, dW_ih, dW_hh and dx as large GEMMs over the
// chunk's rows while its gate gradients are in cache. This is why it is several times faster
// than oneDNN 2.6's reference RNN backward on CPU (docs/BENCHMARKS.md).
// In 16-bit mode (FusedRnnArgs::bf16(), named for the first format) the same GEMMs take bf16
// or fp16 operands (FusedRnnArgs::half) with fp32 accumulation.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_fp16.h"
#include "backend/cpu/recurrent_gemm.h"
#include "backend/cpu/rnn_fused_args.h"
#include "backend/cpu/rnn_primitive.h"

namespace seqtrain {

void fused_rnn_forward(const FusedRnnArgs& a);
void fused_rnn_backward(const FusedRnnArgs& a, const FusedRnnGrads& g);

// Time steps per chunk of the backward's whole-sequence GEMMs (FusedRnnGrads::chunk) for
// batch N and T steps.
int64_t fused_rnn_backward_chunk(int64_t N, int64_t T);

// Size in floats of FusedRnnGrads::bias_partials for batch N.
int64_t fused_rnn_bias_partials(int64_t N, RnnCell cell, int64_t H);

}  // namespace seqtrain
