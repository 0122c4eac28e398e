// EncoderTop: what the transformer and cnn families put above their encoder's per-row outputs
// (rows: tokens or steps), in one place so both read the same:
//   train.task masked_pretrain   a ReconstructionHead (models/reconstruction_head.h) decoding every
//                                row back to the (masked) inputs
//   otherwise                    the model's pooled vector -> head Linear(C, output_size) ->
//                                model.residual_to's baseline -> train.loss quantile's levels
// The pooling stays the model's own (the transformer pools packed rows or its cls token). The
// head's or decoder's parameters are registered when it is built: build it where they belong in
// the buffer, after every encoder layer, so they are its tail.
#pragma once
#include <optional>
#include <vector>

#include "models/model.h"
#include "models/quantile_output.h"
#include "models/reconstruction_head.h"
#include "models/residual_baseline.h"
#include "nn/linear.h"

namespace seqtrain {

class EncoderTop {
 public:
  // width: the encoder's channels C; per_row: the inputs one row stands for (the decoder's output
  // width: P * F for the transformer's patches, F for a cnn's steps).
  EncoderTop(ParamStore& params, const ModelSpec& spec, int64_t width, int64_t per_row);
  void init(Rng& rng);

  // Null unless the model pretrains.
  ReconstructionHead* recon() { return recon_ ? &*recon_ : nullptr; }
  // The model's output: `encode(pooled)` runs the encoder, pooled ([B, C]) for the head, or every
  // row ([B, N, C]) for the decoder, after which `valid` holds each sample's valid rows (empty: all).
  template <typename Encode>
  Tensor forward(const Batch& batch, StepContext& ctx, Encode&& encode, const std::vector<int64_t>& valid) {
    if (recon_) {
      const Tensor h = encode(false);
      return recon_->forward(h, batch.inputs.shape, valid, ctx);
    }
    Tensor out = head_->forward(encode(true), ctx.arena);
    residual_.add_to(batch.inputs, out);
    return quantiles_.forward(out, ctx.arena);
  }
  // From ctx.output_grad, adding the head's or decoder's gradients: d(loss)/d(every row) under
  // reconstruction, d(loss)/d(the pooled vector) otherwise — or an empty Tensor when every encoder
  // tensor is frozen (fine-tuning's first epochs): nothing below the head needs a gradient then.
  Tensor backward(StepContext& ctx);

 private:
  bool encoder_frozen() const;  // every tensor outside head.* frozen (ParamStore flags)

  ParamStore& params_;
  std::optional<Linear> head_;               // none under masked pretraining
  std::optional<ReconstructionHead> recon_;  // masked pretraining's decoder instead of the head
  ResidualBaseline residual_;
  QuantileOutput quantiles_;
};

}  // namespace seqtrain
