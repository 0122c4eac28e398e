// TransformerEncoder: model.type transformer, a pre-LayerNorm transformer encoder over float
// windows x [B, T, F] (forecasting, regression, sequence classification), torch's layers and names,
// so python/seqtrain_torch/transformer.py loads its weights with load_state_dict(strict=True):
//   tokens = x.reshape(B, T / P, P * F)            P = model.patch_size consecutive steps per token
//   h = input_proj(tokens)                         Linear(P*F, C)
//   h = [cls_token; h]                             model.pooling cls only: a learned [1, 1, C] token
//   h = dropout(h + positions)                     model.positions: learned (pos_embed.weight
//                                                  [tokens, C]; auto means learned) | sinusoidal | none
//   h = encoder.layers.{i}(h, key padding)         nn.TransformerEncoderLayer(norm_first=True,
//                                                  activation="gelu", batch_first=True): norm1,
//                                                  self_attn.{in_proj_weight, in_proj_bias, out_proj},
//                                                  norm2, linear1 (C -> 4C), linear2 (nn/transformer_block.h)
//   h = encoder.norm(h)                            the final LayerNorm
//   y = head(pool(h))                              pool over the valid tokens: last | mean | max | cls
//                                                  (nn/sequence_pool.h); head Linear(C, output_size)
// (+ model.residual_to's baseline and train.loss quantile's monotone levels, as the forecasters.)
// Variable length: the batch's lengths (core/batch.h, read on the host with host_lengths()) give
// each sample's valid steps; token j is padding exactly when all its steps are (j * P >= length),
// the cls token never. The model builds that [B, tokens] mask itself, uploads it into the step's
// arena and hands it to every block's attention (padded keys are masked out) and to the pooling,
// so the values at padded steps change no output and no gradient. Without lengths every token is
// valid and no mask is made. T must be a multiple of P (an error naming model.patch_size).
// Packed tokens: when the mask pads a token, the blocks, the final norm and the pooling run on the
// valid tokens only (nn/token_packing.h): h [B, N, C] is gathered into its valid rows [1, Nv, C]
// after the input dropout, only each block's attention op sees the padded layout, and backward
// scatters the gradient back before the input dropout. Padded tokens then cost (nearly) nothing;
// the numbers are the padded path's up to rounding, except that the blocks' dropout masks are keyed
// by packed row (sample b's token t is row start(b) + t), deterministic in (seed, sample, token) as
// before but not the padded layout's masks. Without padding nothing is packed: the path and every
// number are as without lengths.
// runtime.precision (ModelEnv::precision) applies to the blocks (their Linears and attention, bf16
// as the GPT runs them); the input projection, the final norm, pooling and head stay fp32.
// train.grad_checkpoint recomputes each block inside backward.
// Under train.task masked_pretrain a ReconstructionHead (models/reconstruction_head.h) replaces the
// pooling and the head: every token's output is decoded back to its P steps of (masked) inputs;
// nothing is packed then.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "models/encoder_top.h"
#include "models/model.h"
#include "nn/dropout.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/positions.h"
#include "nn/sequence_pool.h"
#include "nn/token_packing.h"
#include "nn/transformer_block.h"

namespace seqtrain {

class TransformerEncoder : public Model {
 public:
  explicit TransformerEncoder(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;
  // The pooled final-norm output the head reads, [batch, hidden].
  int64_t embedding_size() const override { return spec_.hidden; }
  Tensor embed(const Batch& batch, StepContext& ctx) override;
  // Whether padded batches run packed (the default); tests turn it off to compare the padded path.
  void set_packing(bool on) { pack_ = on; }

 private:
  void init_params(Rng& rng) override;
  // The pooled encoder output [B, C] (pooled), or every token's after the final norm [B, N, C].
  Tensor encode(const Batch& batch, StepContext& ctx, bool training, bool pooled = true);
  // The valid tokens of each sample from the batch's lengths (empty when every token is valid) and
  // their padding mask in the arena (null then).
  const uint8_t* token_mask(const Batch& batch, const StepContext& ctx, int64_t T);
  Tensor prepend_cls(const Tensor& h, Arena& arena);      // [B, N, C] -> [B, N + 1, C]
  Tensor cls_backward(const Tensor& dh, Arena& arena);    // adds into cls_token's gradient; -> [B, N, C]

  int64_t patch_;          // steps per token
  bool cls_;               // pooling cls: a token prepended
  Linear input_proj_;
  std::optional<size_t> cls_token_;  // its ParamStore entry
  Positions positions_;
  Dropout drop_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  LayerNorm ln_f_;
  SequencePool pool_;
  EncoderTop top_;          // head (+ residual, quantiles), or masked pretraining's decoder
  Arena scratch_;          // gradient checkpointing's per-block recompute arena
  std::vector<int64_t> valid_;  // valid tokens per sample of the last forward (empty: all)
  bool pack_ = true;
  std::optional<TokenPacking> packing_;  // the last forward's layout, when it packed
};

}  // namespace seqtrain
