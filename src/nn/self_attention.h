// SelfAttention: multi-head self-attention over x [B, T, C], the one attention layer of every
// transformer in seqtrain (the GPT's causal blocks and the encoder's padded ones):
//   qkv = in_proj(x)                         Linear(C, 3C), q | k | v along the last dim
//   y   = attention(qkv)                     H heads of D = C / H, scale 1/sqrt(D), causal or
//                                            not, padded keys masked, attention dropout inside
//   out = resid_dropout(out_proj(y))         Linear(C, C), then Dropout
// Its parameter names are the caller's (AttentionNames), so one layer is both nanoGPT's
// CausalSelfAttention (attn.c_attn.weight/bias, attn.c_proj.*) and torch's nn.MultiheadAttention
// (self_attn.in_proj_weight, self_attn.in_proj_bias, self_attn.out_proj.*): same packing, q | k | v
// rows of one [3C, C] weight.
// The attention runs on params.backend() (backend.h's attention_forward / attention_backward);
// options.precision is the operand type of all three products (in_proj, the attention op,
// out_proj): f32, or bf16 with fp32 accumulation and softmax (the run's policy, backend/precision.h).
// The key-padding mask ([B, T] u8 in the backend's memory, nonzero = padding) removes padded keys
// from every query's softmax; a padded query's output is computed but is no valid step's input, so
// callers read only valid rows (a pooling over valid steps does). It must stay alive until backward.
// The dropout masks are pure functions of the seed given to each forward (as nn/dropout.h):
// attention dropout uses mix_seed(seed, 0), residual dropout mix_seed(seed, 1). Evaluation
// (training = false) drops nothing. Masks are seqtrain's own, not torch's.
//
// Packed tokens (nn/token_packing.h): given a TokenPacking, x and the output are the packed valid
// rows [1, Nv, C]; the projections run on those rows only and the attention op alone sees the
// padded layout: qkv is scattered into [B, N, 3C] (zeros at padding) and its output gathered back.
// The key-padding mask must then mark exactly the packing's padding.
//
// Saved for backward, in the caller's Arena: qkv [B, T, 3C], the attention output [B, T, C], its
// logsumexp [B, H, T], and Linear's views. All must stay alive and unchanged until backward.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/params.h"
#include "nn/token_packing.h"

namespace seqtrain {

// The parameter names under the layer's prefix.
struct AttentionNames {
  std::string qkv_weight, qkv_bias, out;  // out: the output projection's prefix (.weight, .bias)
  static AttentionNames nanogpt() { return {"c_attn.weight", "c_attn.bias", "c_proj"}; }
  static AttentionNames torch() { return {"in_proj_weight", "in_proj_bias", "out_proj"}; }
};

struct SelfAttentionOptions {
  int64_t n_head = 1;
  bool causal = true;           // each step sees only itself and earlier steps (GPT); false: all (encoder)
  bool bias = true;             // in_proj and out_proj biases
  float attn_dropout = 0.f;     // on the attention probabilities
  float resid_dropout = 0.f;    // after out_proj
  DType precision = DType::f32; // in_proj's, the attention op's and out_proj's products: f32 or bf16
  AttentionNames names = AttentionNames::nanogpt();
};

struct SelfAttention {
  // n_embd must be a multiple of options.n_head (a seqtrain::Error otherwise).
  SelfAttention(ParamStore& params, const std::string& prefix, int64_t n_embd, const SelfAttentionOptions& options);

  // PyTorch's nn.Linear default for both projections (in_proj first). A model's own scheme
  // (nanoGPT's normal(0, 0.02)) is the model's to apply.
  void init(Rng& rng);
  // x [B, T, C] -> [B, T, C]; key_padding_mask: null, or [B, T] u8 as above; packing: null, or
  // the layout of a packed x [1, Nv, C] -> [1, Nv, C], alive until backward.
  Tensor forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed,
                 const uint8_t* key_padding_mask = nullptr, const TokenPacking* packing = nullptr);
  // Adds every parameter gradient into params.grad(); returns dx, x's shape.
  Tensor backward(const Tensor& dy, Arena& arena);

  ParamStore& params;
  int64_t n_embd;
  SelfAttentionOptions options;
  Linear in_proj, out_proj;
  Dropout resid_drop;
  // The last forward's attention state (arena views) and its arguments.
  Tensor qkv, y, lse;
  float attn_p = 0.f;  // the attention dropout the last forward applied (0 in evaluation)
  DropoutSeed attn_seed;
  const uint8_t* mask = nullptr;
  const TokenPacking* packing = nullptr;

 private:
  AttentionArgs attention_args() const;  // the op's arguments for the saved state
};

}  // namespace seqtrain
