// MlpForecaster: the "FNN" baseline. Flattens the window time-major ([N, T*F], index t*F+f),
// then (Linear -> ReLU -> Dropout) x layers, then Linear to horizon*targets. Parameter names
// follow python/seqtrain_torch/models.py::MLPForecaster: body.{3k}.weight/bias, head.*.
#pragma once
#include <vector>

#include "models/model.h"
#include "models/quantile_output.h"
#include "models/residual_baseline.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"

namespace seqtrain {

class MlpForecaster : public Model {
 public:
  explicit MlpForecaster(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;

 private:
  void init_params(Rng& rng) override;
  std::vector<Linear> body_;
  std::vector<Dropout> drops_;
  std::vector<Activation> relus_;
  Linear head_;
  ResidualBaseline residual_;  // model.residual_to
  QuantileOutput quantiles_;   // train.loss quantile
};

}  // namespace seqtrain
