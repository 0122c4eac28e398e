// ResidualBaseline: model.residual_to for the window forecasters (lstm, gru, mlp). The forecast
// is the network's output plus a baseline read from the window itself, in the model's
// (normalized) units: each target's last observed value (last_value), or its value one period
// back at the same phase (seasonal_naive, period data.seasons' longest). The network so learns
// the correction to the baseline, and a run starts from the baseline instead of below it; with
// the output layer zeroed the forecast is the baseline exactly.
// Why a GEMM: the selection is a fixed 0/1 matrix S [lookback*features, horizon*targets], so
// out += x S runs on every backend with no kernel of its own, and each output is one x value
// times 1 plus exact zeros, so the baseline passes through unrounded. S is no parameter: the
// backward pass is the network's alone.
#pragma once
#include <cstdint>

#include "backend/device_buffer.h"
#include "core/tensor.h"
#include "models/model.h"

namespace seqtrain {

class ResidualBaseline {
 public:
  // Inactive unless spec.residual_to names a baseline.
  ResidualBaseline(const ModelSpec& spec, Backend& backend);
  bool active() const { return !select_.empty(); }
  // out [B, horizon * targets * levels] += the baseline of each window of x [B, lookback,
  // features] (f32), into each target and step's first quantile level (the only one without one).
  void add_to(const Tensor& x, Tensor& out);

 private:
  Backend* backend_;
  int64_t in_ = 0, out_ = 0;
  DeviceBuffer select_;
};

}  // namespace seqtrain
