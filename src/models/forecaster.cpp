#include "models/forecaster.h"

#include "models/registry.h"

namespace seqtrain {

Forecaster::Forecaster(const ModelSpec& spec, const ModelEnv& env)
    : Model(spec, env),
      rnn_(params_, "rnn", rnn_cell(spec.type), spec.input_size, spec.hidden,
           spec.layers, spec.bidirectional, spec.dropout, rnn_options(spec, env)),
      drop_(spec.dropout, &params_.backend()),
      head_(params_, "head", rnn_.output_size(), spec.output_size),
      residual_(spec, params_.backend()),
      quantiles_(spec, params_.backend()) {
  if (spec.future_steps > 0)
    future_head_.emplace(params_, "future_head", spec.future_steps * spec.input_size, spec.output_size, /*bias=*/false);
  finish_params();
}

void Forecaster::init_params(Rng& rng) {
  rnn_.init(rng);
  head_.init(rng);
  if (future_head_) future_head_->init(rng);
}

Tensor Forecaster::forward(const Batch& batch, StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor top, future;
  if (future_head_) {
    // Time-major, the lookback is a prefix and the known future the rest: [L + H, B, F].
    const Tensor& x = batch.inputs;
    ST_CHECK(x.shape.size() == 3 && x.shape[1] == spec_.lookback + spec_.future_steps,
             "forecaster input must be [batch, {} + {} known-future steps, {}], got {}", spec_.lookback,
             spec_.future_steps, spec_.input_size, shape_str(x.shape));
    const Tensor xt = transpose01(params_.backend(), x, arena);
    top = rnn_.forward_time_major(xt.slice0(0, spec_.lookback), arena, ctx.training, ctx.dropout_seed);
    const Tensor ahead = transpose01(params_.backend(), xt.slice0(spec_.lookback, x.shape[1]), arena);
    future = ahead.reshape({x.shape[0], spec_.future_steps * spec_.input_size});
  } else {
    top = rnn_.forward(batch.inputs, arena, ctx.training, ctx.dropout_seed);
  }
  top_shape_ = top.shape;
  Tensor last = top.slice0(top.shape[0] - 1, top.shape[0]).reshape({top.shape[1], top.shape[2]});
  Tensor h = drop_.forward(last, arena, ctx.training, mix_seed(ctx.dropout_seed, 0x4ead));
  Tensor out = head_.forward(h, arena);
  if (future_head_) {
    const Tensor f = future_head_->forward(future, arena);
    params_.backend().add(out.f32(), f.f32(), out.f32(), static_cast<size_t>(out.numel()));
  }
  residual_.add_to(batch.inputs, out);
  return quantiles_.forward(out, arena);
}

void Forecaster::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  const Tensor dout = quantiles_.backward(ctx.output_grad, arena);
  if (future_head_) future_head_->backward(dout, arena);  // its weight's gradient; the input is data
  Tensor dlast = drop_.backward(head_.backward(dout, arena), arena);
  // Only the last time step feeds the head; every earlier step's output gradient is zero.
  Tensor dtop = arena.zeros(top_shape_);
  const int64_t step = top_shape_[1] * top_shape_[2];
  params_.backend().copy(dlast.f32(), dtop.f32() + (top_shape_[0] - 1) * step, static_cast<size_t>(step));
  rnn_.backward(dtop, arena, false);
  ctx.note_scratch(rnn_.checkpoint_scratch_bytes());
}

}  // namespace seqtrain
