#include "models/mlp.h"

namespace seqtrain {

MlpForecaster::MlpForecaster(const ModelSpec& spec, const ModelEnv& env)
    : Model(spec, env), head_(params_, "head", spec.hidden, spec.output_size), residual_(spec, params_.backend()),
      quantiles_(spec, params_.backend()) {
  const int64_t flat = (spec.lookback + spec.future_steps) * spec.input_size;  // the known future's rows too
  body_.reserve(spec.layers);
  for (int64_t k = 0; k < spec.layers; ++k) {
    body_.emplace_back(params_, "body." + std::to_string(3 * k), k == 0 ? flat : spec.hidden, spec.hidden);
    relus_.emplace_back(ActKind::relu, &params_.backend());
    drops_.emplace_back(spec.dropout, &params_.backend());
  }
  finish_params();
}

void MlpForecaster::init_params(Rng& rng) {
  for (auto& l : body_) l.init(rng);
  head_.init(rng);
}

Tensor MlpForecaster::forward(const Batch& batch, StepContext& ctx) {
  const Tensor& x = batch.inputs;
  Arena& arena = ctx.arena;
  const int64_t steps = spec_.lookback + spec_.future_steps;
  ST_CHECK(x.shape.size() == 3 && x.shape[1] * x.shape[2] == steps * spec_.input_size,
           "MLP input must be [batch, {}, {}], got {}", steps, spec_.input_size, shape_str(x.shape));
  Tensor h = x.reshape({x.shape[0], x.shape[1] * x.shape[2]});
  for (size_t k = 0; k < body_.size(); ++k) {
    h = relus_[k].forward(body_[k].forward(h, arena), arena);
    h = drops_[k].forward(h, arena, ctx.training, mix_seed(ctx.dropout_seed, k));
  }
  Tensor out = head_.forward(h, arena);
  residual_.add_to(x, out);
  return quantiles_.forward(out, arena);
}

void MlpForecaster::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor d = head_.backward(quantiles_.backward(ctx.output_grad, arena), arena);
  for (size_t k = body_.size(); k-- > 0;) {
    d = relus_[k].backward(drops_[k].backward(d, arena), arena);
    d = body_[k].backward(d, arena);
  }
}

}  // namespace seqtrain
