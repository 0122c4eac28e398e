// EncoderTop's construction and backward. See encoder_top.h.
#include "models/encoder_top.h"

namespace seqtrain {

EncoderTop::EncoderTop(ParamStore& params, const ModelSpec& spec, int64_t width, int64_t per_row)
    : params_(params), residual_(spec, params.backend()), quantiles_(spec, params.backend()) {
  if (spec.reconstruct) recon_.emplace(params, spec, width, per_row);
  else head_.emplace(params, "head", width, spec.output_size);
}

void EncoderTop::init(Rng& rng) {
  if (head_) head_->init(rng);
  if (recon_) recon_->init(rng);
}

Tensor EncoderTop::backward(StepContext& ctx) {
  if (recon_) return recon_->backward(ctx);
  const Tensor dpooled = head_->backward(quantiles_.backward(ctx.output_grad, ctx.arena), ctx.arena);
  return encoder_frozen() ? Tensor{} : dpooled;
}

bool EncoderTop::encoder_frozen() const {
  for (const ParamEntry& e : params_.entries())
    if (!e.frozen && e.name.compare(0, 5, "head.") != 0) return false;
  return true;
}

}  // namespace seqtrain
