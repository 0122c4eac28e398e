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
  finish_params();
}

void Forecaster::init_params(Rng& rng) {
  rnn_.init(rng);
  head_.init(rng);
}

Tensor Forecaster::forward(const Batch& batch, StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor top = rnn_.forward(batch.inputs, arena, ctx.training, ctx.dropout_seed);
  top_shape_ = top.shape;
  Tensor last = top.slice0(top.shape[0] - 1, top.shape[0]).reshape({top.shape[1], top.shape[2]});
  Tensor h = drop_.forward(last, arena, ctx.training, mix_seed(ctx.dropout_seed, 0x4ead));
  Tensor out = head_.forward(h, arena);
  residual_.add_to(batch.inputs, out);
  return quantiles_.forward(out, arena);
}

void Forecaster::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor dlast = drop_.backward(head_.backward(quantiles_.backward(ctx.output_grad, arena), arena), arena);
  // Only the last time step feeds the head; every earlier step's output gradient is zero.
  Tensor dtop = arena.zeros(top_shape_);
  const int64_t step = top_shape_[1] * top_shape_[2];
  params_.backend().copy(dlast.f32(), dtop.f32() + (top_shape_[0] - 1) * step, static_cast<size_t>(step));
  rnn_.backward(dtop, arena, false);
  ctx.note_scratch(rnn_.checkpoint_scratch_bytes());
}

}  // namespace seqtrain
