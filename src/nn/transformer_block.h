// TransformerBlock: the pre-LayerNorm transformer block every seqtrain transformer stacks, nanoGPT's
// Block and torch's nn.TransformerEncoderLayer(norm_first=True, activation="gelu") alike:
//   x = x + attn(ln_1(x))          SelfAttention (nn/self_attention.h): causal or not, key padding
//   x = x + mlp(ln_2(x))           fc Linear(C, 4C) -> GELU (exact erf) [-> dropout] -> proj Linear(4C, C) -> dropout
// The two differ only in their names, causality and torch's dropout after the GELU, so they are
// options: TransformerBlockNames::nanogpt() (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
// mlp.c_proj) and ::torch_encoder() (norm1, self_attn.in_proj_*, self_attn.out_proj, norm2,
// linear1, linear2), under "<prefix>."; biases only with `bias`. x is [B, T, C], contiguous, or
// packed valid tokens [1, Nv, C] with their TokenPacking (nn/token_packing.h): then every layer
// but the attention op runs on the valid rows only, and the dropout masks are keyed by packed row.
//
// With gradient checkpointing the block keeps only its input in the step's arena: forward runs
// in a scratch arena of its own and copies the output out; backward runs forward again there
// (same seed, so the same dropout masks) and then its backward. The scratch holds one block's
// activations at a time and is shared by every block of the model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/self_attention.h"

namespace seqtrain {

// out = a + b elementwise, in the arena: the blocks' residual adds.
Tensor residual_add(Backend& backend, const Tensor& a, const Tensor& b, Arena& arena);

// The block's parameter names under its prefix.
struct TransformerBlockNames {
  std::string ln_1, attn, ln_2, fc, proj;
  AttentionNames attn_names;
  static TransformerBlockNames nanogpt() {
    return {"ln_1", "attn", "ln_2", "mlp.c_fc", "mlp.c_proj", AttentionNames::nanogpt()};
  }
  static TransformerBlockNames torch_encoder() {
    return {"norm1", "self_attn", "norm2", "linear1", "linear2", AttentionNames::torch()};
  }
};

struct TransformerBlockOptions {
  int64_t n_embd = 0, n_head = 1;
  bool causal = true;              // GPT: true; an encoder: false
  bool bias = true;
  float dropout = 0.f;             // attention, residual and MLP output dropout (one rate, as both modules)
  bool dropout_after_gelu = false; // torch's TransformerEncoderLayer drops the GELU's output too
  DType compute = DType::f32;      // every product's operands (the four Linears, attention): f32 or bf16
  bool checkpoint = false;         // recompute the block inside backward
  TransformerBlockNames names = TransformerBlockNames::nanogpt();
};

class TransformerBlock {
 public:
  TransformerBlock(ParamStore& params, const std::string& prefix, const TransformerBlockOptions& options);
  // PyTorch's defaults for every layer (LayerNorm 1 / 0, Linear uniform), in registration order.
  void init(Rng& rng);
  // x [B, T, C] -> [B, T, C]; `scratch` is the checkpointing arena (unused without it);
  // key_padding_mask: null or [B, T] u8 in the backend's memory, alive until backward; packing:
  // null, or the layout of a packed x [1, Nv, C] (then the mask is required), alive until backward.
  Tensor forward(const Tensor& x, Arena& arena, Arena& scratch, bool training, DropoutSeed seed,
                 const uint8_t* key_padding_mask = nullptr, const TokenPacking* packing = nullptr);
  // dy (x's shape) -> dx; adds every parameter gradient.
  Tensor backward(const Tensor& dy, Arena& arena, Arena& scratch);

 private:
  Tensor forward_layers(const Tensor& x, Arena& arena, bool training, DropoutSeed seed);
  Tensor backward_layers(const Tensor& dy, Arena& arena);

  TransformerBlockOptions options_;
  Backend& backend_;  // the residual adds' and checkpoint copies' (the parameters' backend)
  LayerNorm ln_1_;
  SelfAttention attn_;
  LayerNorm ln_2_;
  Linear fc_;
  Activation gelu_;
  DType half_out_;    // ln_1 and ln_2's output type: the compute type when the backend rounds as it writes
  DType gelu_out_;    // the GELU's: the same, unless a dropout (which reads fp32) comes between it and proj
  Dropout act_drop_;
  Linear proj_;
  Dropout mlp_drop_;
  // The forward's arguments: checkpointing's recompute runs it again on them.
  Tensor x_saved_;
  bool training_ = false;
  DropoutSeed seed_;
  const uint8_t* mask_ = nullptr;
  const TokenPacking* packing_ = nullptr;
};

// n blocks named "<prefix>.<i>", built in order, so their parameters register in that order (the
// model file's, which a PyTorch state_dict has too).
std::vector<std::unique_ptr<TransformerBlock>> make_blocks(ParamStore& params, const std::string& prefix, int64_t n,
                                                           const TransformerBlockOptions& options);

}  // namespace seqtrain
