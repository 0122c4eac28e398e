// ReconstructionHead: what an encoder family (lstm, gru, transformer) carries instead of its head
// under train.task masked_pretrain (moola's pipeline; Zerveas et al. 2021 for transformers). The
// encoder stays the classifier's own layers under the classifier's names, so its weights move to a
// classifier as they are (model.encoder_from); only this part is pretraining's:
//   x_in = where(mask, fill, x)     mask: the batch's loss_mask [B, T, F] (data/masking.h), fill the
//                                   learned mask_token [F] (train.masking.fill token) or 0 (zero)
//   h    = encoder(x_in)            the family's per-step (per-token) output [B, N, C]
//   out  = decoder(h)               decoder.norm LayerNorm(C) -> decoder.fc1 Linear(C, C) -> GELU
//                                   -> decoder.fc2 Linear(C, P * F); [B, N, P*F] read as [B, T, F]
// The objective (train/objective.h, masked_pretrain) scores out against x over the masked, valid
// positions only. train.masking.std_penalty w adds, in training, VICReg's variance term against
// collapsed representations: w * mean over the C dimensions of relu(1 - sqrt(var + 1e-4)), var the
// population variance of h's dimension over the batch's valid rows. Its value per counted target
// goes out through StepContext::aux_loss; its gradient comes in scaled by StepContext::aux_weight.
// Masking, the penalty and the token's gradient are host loops: masked pretraining runs on the
// CPU for now (a device backend is refused by name).
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "core/arena.h"
#include "core/batch.h"
#include "core/rng.h"
#include "models/model.h"
#include "models/step_context.h"
#include "nn/activation.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/params.h"

namespace seqtrain {

class ReconstructionHead {
 public:
  // width: the encoder's output channels C; per_token: the inputs one output row stands for
  // (P * F, P the transformer's steps per token, 1 for an RNN).
  ReconstructionHead(ParamStore& params, const ModelSpec& spec, int64_t width, int64_t per_token);
  void init(Rng& rng);

  // x with its masked positions filled; the batch's inputs themselves when it carries no mask
  // (embed, or predicting on unmasked data).
  Tensor mask_inputs(const Batch& batch, Arena& arena);
  // h [B, N, C] -> reconstruction shaped like the inputs [B, T, F]. valid: each sample's valid
  // rows of h (empty: all N), for the penalty.
  Tensor forward(const Tensor& h, const Shape& input_shape, std::span<const int64_t> valid, StepContext& ctx);
  // d(loss)/d(out) (ctx.output_grad) -> d(loss)/d(h), the penalty's gradient included.
  Tensor backward(StepContext& ctx);
  // The fill token learns from the encoder's input gradient, which only it needs.
  bool wants_input_grad() const { return token_.has_value() && mask_ != nullptr; }
  // dx [B, T, F] of x_in: the token's gradient, the sum over the masked positions.
  void input_backward(const Tensor& dx);

 private:
  double penalty_forward(const Tensor& h, std::span<const int64_t> valid);
  void penalty_backward(Tensor dh, double weight) const;
  // fn(row of h_, the same row of *d or null) for each valid row of the last penalty_forward's h
  // [B, N, C] (the first valid_[b] rows of sample b; every row when valid_ is empty).
  template <typename Fn>
  void for_each_valid_row(Fn&& fn, Tensor* d = nullptr) const {
    const int64_t B = h_.dim(0), N = h_.dim(1), C = h_.dim(2);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t n = 0, rows = valid_.empty() ? N : valid_[static_cast<size_t>(b)]; n < rows; ++n)
        fn(h_.f32() + (b * N + n) * C, d ? d->f32() + (b * N + n) * C : nullptr);
  }

  ParamStore& params_;
  int64_t features_;
  float penalty_weight_;
  std::optional<size_t> token_;  // mask_token [F]
  LayerNorm norm_;
  Linear fc1_;
  Activation gelu_;
  Linear fc2_;
  Shape out_shape_;              // the decoder's [B, N, P*F] of the last forward
  const float* mask_ = nullptr;  // the last forward's loss_mask (host-accessible), null: none
  // The penalty's saved state: the valid rows of h, and per dimension its mean and
  // 1 / std where relu(1 - std) > 0 (0 elsewhere: no gradient).
  Tensor h_;
  std::vector<int64_t> valid_;
  std::vector<double> mean_, active_inv_std_;
  int64_t rows_ = 0;
};

}  // namespace seqtrain
