// Quantile forecasts that never cross. See quantile_output.h.
#include "models/quantile_output.h"

#include "backend/backend.h"
#include "core/error.h"

namespace seqtrain {

QuantileOutput::QuantileOutput(const ModelSpec& spec, Backend& backend)
    : backend_(&backend), levels_(spec.quantile_levels) {
  ST_CHECK(levels_ >= 1 && spec.output_size % levels_ == 0,
           "train.quantiles: the model's {} outputs are not a whole number of {} levels per target and step",
           spec.output_size, levels_);
}

Tensor QuantileOutput::forward(const Tensor& raw, Arena& arena) {
  if (!active()) return raw;
  raw_ = raw;
  Tensor out = arena.tensor(raw.shape);
  backend_->monotone_quantiles_forward(raw.f32(), out.f32(), raw.numel() / levels_, levels_);
  return out;
}

Tensor QuantileOutput::backward(const Tensor& dout, Arena& arena) {
  if (!active()) return dout;
  Tensor draw = arena.tensor(dout.shape);
  backend_->monotone_quantiles_backward(raw_.f32(), dout.f32(), draw.f32(), dout.numel() / levels_, levels_);
  return draw;
}

}  // namespace seqtrain
