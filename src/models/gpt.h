// Gpt: nanoGPT's character/token GPT (model.py's GPT), layer for layer and name for name, so a
// seqtrain checkpoint loads into nanoGPT's GPT (and python/seqtrain_torch/gpt.py) with
// load_state_dict(strict=True) and back:
//   x = drop(wte(idx) + wpe(pos))                  transformer.wte [V, C], transformer.wpe [block, C]
//   x = block_i(x) for i < n_layer                 transformer.h.{i}.* (nn/transformer_block.h: causal,
//                                                  nanoGPT's names)
//   logits = ln_f(x) @ wte^T                       transformer.ln_f; lm_head.weight is wte (tied)
// The head is tied to the token embedding as in nanoGPT: one tensor in the ParamStore (the
// optimizer, clipping and gradients see it once, its gradient the sum of both uses) and an
// alias "lm_head.weight" in the model file (ParamStore::add_alias), which nanoGPT's state_dict
// has. ModelSpec: hidden = n_embd, layers = n_layer, heads = n_head, lookback = block_size,
// vocab_size, bias, dropout; inputs are [B, T <= block] token ids, the result [B, T, V] logits.
//
// Initialisation is nanoGPT's: normal(0, 0.02) for every Linear and Embedding weight, the two
// residual projections (attn.c_proj, mlp.c_proj) with std 0.02 / sqrt(2 n_layer), zero biases,
// LayerNorm weight 1. The draws are seqtrain's, so the values differ from torch's for a seed.
//
// The run's precision policy (ModelEnv::precision; runtime.precision bf16, or auto on a bf16 CPU)
// runs every matrix product in bf16 with fp32 accumulation, as torch.autocast does: the four
// Linears of each block, the attention op and the tied head (x and wte rounded, fp32 logits).
// Master weights, embeddings, LayerNorm, GELU, softmax, residuals, the loss and the optimizer stay
// fp32. fp16 is refused by name.
// train.grad_checkpoint recomputes each block inside backward (nn/transformer_block.h).
//
// Generation (TextGenerator) keeps a KV cache per layer: each new token runs the blocks on one
// position, attending to the cached keys and values of the tokens before it, in fp32 loops —
// the same arithmetic as the full forward, checked against it in tests/test_gpt.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/text_model.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/positions.h"
#include "nn/transformer_block.h"

namespace seqtrain {

class Gpt : public TextModel {
 public:
  explicit Gpt(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;

  std::unique_ptr<GenState> begin() const override;
  void next_logits(GenState& state, int64_t token, float* logits) override;

 private:
  void init_params(Rng& rng) override;
  Tensor head_forward(const Tensor& x, Arena& arena);   // [B, T, C] -> [B, T, V], tied to wte
  Tensor head_backward(const Tensor& dlogits, Arena& arena);  // -> dx [B, T, C]; adds into wte's gradient

  Embedding wte_;
  Positions wpe_;        // learned: transformer.wpe.weight
  Dropout drop_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  LayerNorm ln_f_;
  WeightProduct head_;   // logits = ln_f(x) wte^T in the policy's precision (it keeps its input)
  Arena scratch_;        // gradient checkpointing's per-block recompute arena
  int64_t B_ = 0, T_ = 0;
};

// nanoGPT's initialisation of a ParamStore with its names (see the top): Gpt::init, and the
// benchmark that rebuilds the model from its layers.
void init_nanogpt(ParamStore& params, int64_t n_layer, Rng& rng);

// The checks a GPT adds (model.heads dividing model.hidden, a vocabulary; no fp16 policy), before
// anything is built; errors name the config key and the fix.
void check_gpt_spec(const ModelSpec& spec, const Precision& precision = {});

}  // namespace seqtrain
