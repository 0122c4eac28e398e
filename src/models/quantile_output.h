// QuantileOutput: the window forecasters' last step under train.loss quantile. The head gives
// one unconstrained value per target, step and level; this makes them quantile forecasts that
// never cross (the first level as is, each next one the previous plus a softplus:
// Backend::monotone_quantiles_forward), so a predicted interval is never upside down. With one
// level it passes the head's outputs through untouched.
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "core/tensor.h"
#include "models/model.h"

namespace seqtrain {

class QuantileOutput {
 public:
  QuantileOutput(const ModelSpec& spec, Backend& backend);
  bool active() const { return levels_ > 1; }
  // raw [B, outputs] (levels innermost) -> quantiles of the same shape; keeps raw for backward.
  Tensor forward(const Tensor& raw, Arena& arena);
  // d(loss)/d(quantiles) -> d(loss)/d(raw).
  Tensor backward(const Tensor& dout, Arena& arena);

 private:
  Backend* backend_;
  int64_t levels_ = 1;
  Tensor raw_;
};

}  // namespace seqtrain
