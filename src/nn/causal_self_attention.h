// CausalSelfAttention: nanoGPT's module of that name (model.py), layer for layer:
//   qkv = c_attn(x)                          Linear(C, 3C), q | k | v along the last dim
//   y   = attention(qkv)                     causal, H heads of D = C / H, scale 1/sqrt(D),
//                                            attention dropout inside (the Backend's op)
//   out = resid_dropout(c_proj(y))           Linear(C, C), then Dropout
// x and out are [B, T, C], contiguous. Parameters (PyTorch state_dict names under `prefix`):
//   <prefix>.c_attn.weight [3C, C], <prefix>.c_attn.bias [3C]  (bias only with options.bias)
//   <prefix>.c_proj.weight [C, C],  <prefix>.c_proj.bias [C]   (idem)
// The attention runs on params.backend() (backend.h's attention_forward / attention_backward);
// options.precision is the operand type of all three products (c_attn, the attention op, c_proj):
// f32, or bf16 with fp32 accumulation and softmax (the run's policy, backend/precision.h).
// The dropout masks are pure functions of the seed given to each forward (as nn/dropout.h):
// pass a fresh one per step (e.g. mix_seed(run_seed, step * n_layer + layer)) and a run
// replays exactly; attention dropout uses mix_seed(seed, 0), residual dropout mix_seed(seed, 1).
// Evaluation (training = false) drops nothing. Masks are seqtrain's own, not torch's.
//
// Saved for backward, in the caller's Arena: qkv [B, T, 3C], the attention output [B, T, C], its
// logsumexp [B, H, T], the residual dropout mask, and Linear's views. All must stay alive and
// unchanged until backward (true within one Arena cycle).
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/params.h"

namespace seqtrain {

struct CausalSelfAttentionOptions {
  int64_t n_head = 1;
  bool bias = true;             // nanoGPT's config.bias: c_attn and c_proj biases
  float attn_dropout = 0.f;     // on the attention probabilities (nanoGPT's attn_dropout)
  float resid_dropout = 0.f;    // after c_proj (nanoGPT's resid_dropout)
  DType precision = DType::f32; // c_attn's, the attention op's and c_proj's products: f32 or bf16
};

struct CausalSelfAttention {
  // n_embd must be a multiple of options.n_head (a seqtrain::Error otherwise).
  CausalSelfAttention(ParamStore& params, const std::string& prefix, int64_t n_embd,
                      const CausalSelfAttentionOptions& options);

  // PyTorch's nn.Linear default for both projections (c_attn first). nanoGPT's own init
  // (normal(0, 0.02), c_proj scaled by 1/sqrt(2 n_layer), zero biases) is the model's to apply.
  void init(Rng& rng);
  // x [B, T, C] -> [B, T, C].
  Tensor forward(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  // Adds every parameter gradient into params.grad(); returns dx [B, T, C].
  Tensor backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  int64_t n_embd;
  CausalSelfAttentionOptions options;
  Linear c_attn, c_proj;
  Dropout resid_drop;
  // The last forward's attention state (arena views) and its arguments.
  Tensor qkv, y, lse;
  float attn_p = 0.f;  // the attention dropout the last forward applied (0 in evaluation)
  uint64_t attn_seed = 0;

 private:
  AttentionArgs attention_args() const;  // the op's arguments for the saved state
};

}  // namespace seqtrain
