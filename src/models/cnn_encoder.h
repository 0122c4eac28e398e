// CnnEncoder: model.type cnn, the fully convolutional network of Wang, Yan and Oates (2017), "Time
// series classification from scratch with deep neural networks: a strong baseline", with LayerNorm
// over the channels in place of BatchNorm by default (no batch statistics: the same output for a
// sample in any batch, padded or not, in training and in eval) and the paper's BatchNorm with
// model.norm batch (nn/batch_norm.h: statistics over the batch's valid steps in training, the running
// ones in eval and while frozen), over float windows x [B, T, F] (forecasting,
// regression, sequence classification). Names are python/seqtrain_torch/cnn.py's, so its mirror
// loads the weights with load_state_dict(strict=True):
//   h = x
//   for i < len(model.kernel_sizes), k = kernel_sizes[i] (default [8, 5, 3], the paper's):
//     h = convs.{i}(h)                 Conv1d(C_in, C, k, padding="same", bias): weight [C, C_in, k]
//                                      (torch's layout), bias [C]; C_in = F for i = 0, else C
//     h = relu(norms.{i}(h))           LayerNorm(C) at every step (model.norm layer), or
//                                      BatchNorm1d(C) over the valid steps (model.norm batch: + the
//                                      buffers running_mean, running_var, num_batches_tracked)
//     h = dropout(h)                   model.dropout, training only
//   y = head(pool(h))                  pool over the valid steps: mean (model.pooling auto, the
//                                      paper's global average pooling) | last | max
//                                      (nn/sequence_pool.h); head Linear(C, output_size)
// (+ model.residual_to's baseline and train.loss quantile's monotone levels, as the other
// forecasters.) C is model.hidden; the depth is the kernel list's length (model.layers must stay
// unset, models/registry.cpp's cnn_settings).
// Variable length: with the batch's lengths (core/batch.h, host_lengths()), each conv's input reads
// padded steps as zeros (nn/conv1d.h's mask), so what sits at a padded step — the data's pad value
// or what an earlier layer computed there — reaches no valid step's output and no gradient; the
// pooling reads the valid steps only. Without lengths, or with none short, no mask is made. Any
// T works (a convolution has no fixed length), up to the spec's lookback for the checks' sake.
// Everything runs in fp32 (runtime.precision does not reach it: its registry entry lists no layers).
// A frozen encoder (fine-tuning's first epochs, train.freeze_encoder_epochs) runs no backward below
// the head; a partly frozen one skips each frozen conv's weight gradient (nn/conv1d.h).
// Under train.task masked_pretrain a ReconstructionHead (models/reconstruction_head.h) replaces the
// pooling and the head: every step's output is decoded back to the step's (masked) inputs.
#pragma once
#include <optional>
#include <vector>

#include "models/encoder_top.h"
#include "models/model.h"
#include "nn/activation.h"
#include "nn/conv1d.h"
#include "nn/dropout.h"
#include "nn/batch_norm.h"
#include "nn/layer_norm.h"
#include "nn/sequence_pool.h"

namespace seqtrain {

class CnnEncoder : public Model {
 public:
  explicit CnnEncoder(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;
  // The pooled last block's output the head reads, [batch, hidden].
  int64_t embedding_size() const override { return spec_.hidden; }
  Tensor embed(const Batch& batch, StepContext& ctx) override;

 private:
  // One block: conv -> LayerNorm or BatchNorm (model.norm) -> ReLU -> dropout.
  struct Block {
    Conv1d conv;
    std::optional<LayerNorm> layer_norm;
    std::optional<BatchNorm> batch_norm;
    Activation relu;
    Dropout drop;
  };
  void init_params(Rng& rng) override;
  // Every step's last block output [B, T, C] (pooled: over the valid steps, [B, C]).
  Tensor encode(const Batch& batch, StepContext& ctx, bool training, bool pooled = true);

  std::vector<Block> blocks_;
  SequencePool pool_;
  std::optional<EncoderTop> top_;     // head (+ residual, quantiles) or decoder, built after the blocks
  std::vector<int64_t> valid_;        // valid steps per sample of the last forward (empty: all)
  int64_t valid_rows_ = 0;            // their sum: the rows BatchNorm's statistics run over
  const uint8_t* mask_ = nullptr;     // their [B, T] padding mask in the arena (null: none padded)
};

}  // namespace seqtrain
