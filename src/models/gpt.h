// Gpt: nanoGPT's character/token GPT (model.py's GPT), layer for layer and name for name, so a
// seqtrain checkpoint loads into nanoGPT's GPT (and python/seqtrain_torch/gpt.py) with
// load_state_dict(strict=True) and back:
//   x = drop(wte(idx) + wpe(pos))                  transformer.wte [V, C], transformer.wpe [block, C]
//   x = block_i(x) for i < n_layer                 transformer.h.{i}.* (models/gpt_block.h)
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
// train.grad_checkpoint recomputes each block inside backward (gpt_block.h).
//
// Generation (TextGenerator) keeps a KV cache per layer: each new token runs the blocks on one
// position, attending to the cached keys and values of the tokens before it, in fp32 loops —
// the same arithmetic as the full forward, checked against it in tests/test_gpt.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/device_buffer.h"
#include "models/gpt_block.h"
#include "models/text_model.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"

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
  // wpe's rows onto every sequence of x [B, T, C], and their gradient back: one lookup of the
  // [B, T] position ids (each row 0..T-1).
  void add_positions(const Tensor& x, Arena& arena);
  void positions_backward(const Tensor& dx, Arena& arena);
  Tensor head_forward(const Tensor& x, Arena& arena);   // [B, T, C] -> [B, T, V], tied to wte
  Tensor head_backward(const Tensor& dlogits, Arena& arena);  // -> dx [B, T, C]; adds into wte's gradient

  Embedding wte_, wpe_;
  Dropout drop_;
  std::vector<std::unique_ptr<GptBlock>> blocks_;
  LayerNorm ln_f_;
  WeightProduct head_;   // logits = ln_f(x) wte^T in the policy's precision (it keeps its input)
  Arena scratch_;        // gradient checkpointing's per-block recompute arena
  // The position ids of a [positions_B_, positions_T_] batch as int64 in the backend's memory
  // (two floats each), written at the first step of a batch shape, so later steps upload none.
  DeviceBuffer positions_;
  int64_t positions_B_ = 0, positions_T_ = 0;
  int64_t B_ = 0, T_ = 0;
};

// nanoGPT's initialisation of a ParamStore with its names (see the top): Gpt::init, and the
// benchmark that rebuilds the model from its layers.
void init_nanogpt(ParamStore& params, int64_t n_layer, Rng& rng);

// The setting a config can get wrong before any data is read: model.heads must divide
// model.hidden. The config key and the message, or nullopt (the registry's check_settings).
std::optional<std::pair<std::string, std::string>> gpt_settings_problem(const ModelSpec& spec);

// The checks a GPT adds (the settings above, a vocabulary; no fp16 policy), before anything is
// built; errors name the config key and the fix.
void check_gpt_spec(const ModelSpec& spec, const Precision& precision = {});

}  // namespace seqtrain
