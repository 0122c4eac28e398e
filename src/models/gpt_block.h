// GptBlock: one transformer block of nanoGPT's GPT (model.py's Block), pre-LayerNorm:
//   x = x + attn(ln_1(x))          CausalSelfAttention (nn/causal_self_attention.h)
//   x = x + mlp(ln_2(x))           c_fc Linear(C, 4C) -> GELU (exact erf) -> c_proj Linear(4C, C) -> dropout
// Parameters under "<prefix>." (nanoGPT's names): ln_1, attn.c_attn, attn.c_proj, ln_2,
// mlp.c_fc, mlp.c_proj; biases only with `bias`. x is [B, T, C], contiguous.
//
// With gradient checkpointing the block keeps only its input in the step's arena: forward runs
// in a scratch arena of its own and copies the output out; backward runs forward again there
// (same seed, so the same dropout masks) and then its backward. The scratch holds one block's
// activations at a time and is shared by every block of the model (ScratchArena below).
#pragma once
#include <cstdint>
#include <string>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/activation.h"
#include "nn/causal_self_attention.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"

namespace seqtrain {

// What a layer feeding a Linear of `compute` writes: compute itself when it is 16-bit and the
// backend rounds as it writes (supports(half_output)), f32 otherwise.
DType half_output_type(const Backend& backend, DType compute);

// out = a + b elementwise, in the arena: the blocks' residual adds.
Tensor residual_add(Backend& backend, const Tensor& a, const Tensor& b, Arena& arena);

struct GptBlockOptions {
  int64_t n_embd = 0, n_head = 1;
  bool bias = true;
  float dropout = 0.f;             // attention, residual and MLP dropout (nanoGPT's one `dropout`)
  DType compute = DType::f32;      // every product's operands (the four Linears, attention): f32 or bf16
  bool checkpoint = false;         // recompute the block inside backward
};

class GptBlock {
 public:
  GptBlock(ParamStore& params, const std::string& prefix, const GptBlockOptions& options);
  // x [B, T, C] -> [B, T, C]; `scratch` is the checkpointing arena (unused without it).
  Tensor forward(const Tensor& x, Arena& arena, Arena& scratch, bool training, uint64_t seed);
  // dy [B, T, C] -> dx; adds every parameter gradient.
  Tensor backward(const Tensor& dy, Arena& arena, Arena& scratch);

 private:
  Tensor forward_layers(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  Tensor backward_layers(const Tensor& dy, Arena& arena);

  GptBlockOptions options_;
  Backend& backend_;  // the residual adds' and checkpoint copies' (the parameters' backend)
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  Linear c_fc_;
  Activation gelu_;
  DType half_out_;    // ln_1, ln_2 and GELU's output type: the compute type when the backend rounds as it writes
  Linear c_proj_;
  Dropout mlp_drop_;
  // Checkpointing: the block's input (a view into the step's arena) and the forward's arguments.
  Tensor x_saved_;
  bool training_ = false;
  uint64_t seed_ = 0;
};

}  // namespace seqtrain
