#include "models/forecaster.h"
#include "nn/grad_ready.h"

#include "models/registry.h"
#include "models/step_context.h"

namespace seqtrain {

Forecaster::Forecaster(const ModelSpec& spec, const ModelEnv& env)
    : Model(spec, env),
      rnn_(params_, "rnn", rnn_cell(spec.type), spec.input_size, spec.hidden,
           spec.layers, spec.bidirectional, spec.dropout, rnn_options(spec, env)),
      pool_(params_.backend(), pool_kind(spec.pooling)),
      drop_(spec.dropout, &params_.backend()),
      residual_(spec, params_.backend()),
      quantiles_(spec, params_.backend()) {
  if (spec.reconstruct) recon_.emplace(params_, spec, rnn_.output_size(), spec.input_size);
  else head_.emplace(params_, "head", rnn_.output_size(), spec.output_size);
  if (spec.future_steps > 0)
    future_head_.emplace(params_, "future_head", spec.future_steps * spec.input_size, spec.output_size, /*bias=*/false);
  finish_params();
}

void Forecaster::init_params(Rng& rng) {
  rnn_.init(rng);
  if (head_) head_->init(rng);
  if (recon_) recon_->init(rng);
  if (future_head_) future_head_->init(rng);
}

// The RNN over the window (the lookback only when x carries known future rows, handed back in
// *future as [B, future_steps * F]) and its pooled top layer: what the head reads.
Tensor Forecaster::encode(const Batch& batch, StepContext& ctx, bool training, Tensor* future) {
  Arena& arena = ctx.arena;
  const std::span<const int64_t> lengths = host_lengths(batch, ctx);
  // Both would need a rule for where a short window's known future and last value sit.
  ST_CHECK(lengths.empty() || (!future_head_ && !residual_.active()),
           "variable-length windows (a batch with lengths) do not combine with data.future_features or "
           "model.residual_to: use fixed-length windows for those");
  Tensor top;
  if (future_head_) {
    // Time-major, the lookback is a prefix and the known future the rest: [L + H, B, F].
    const Tensor& x = batch.inputs;
    ST_CHECK(x.shape.size() == 3 && x.shape[1] == spec_.lookback + spec_.future_steps,
             "forecaster input must be [batch, {} + {} known-future steps, {}], got {}", spec_.lookback,
             spec_.future_steps, spec_.input_size, shape_str(x.shape));
    const Tensor xt = transpose01(params_.backend(), x, arena);
    top = rnn_.forward_time_major(xt.slice0(0, spec_.lookback), arena, training, ctx.dropout_seed);
    const Tensor ahead = transpose01(params_.backend(), xt.slice0(spec_.lookback, x.shape[1]), arena);
    if (future) *future = ahead.reshape({x.shape[0], spec_.future_steps * spec_.input_size});
  } else {
    top = rnn_.forward(batch.inputs, arena, training, ctx.dropout_seed, lengths);
  }
  return pool(top, lengths, arena);
}

Tensor Forecaster::forward(const Batch& batch, StepContext& ctx) {
  Arena& arena = ctx.arena;
  if (recon_) {
    // Masked pretraining: every step's output, batch-first, decoded back to the inputs.
    const std::span<const int64_t> lengths = host_lengths(batch, ctx);
    const Tensor top = rnn_.forward(recon_->mask_inputs(batch, arena), arena, ctx.training, ctx.dropout_seed, lengths);
    top_shape_ = top.shape;
    return recon_->forward(transpose01(params_.backend(), top, arena), batch.inputs.shape, lengths, ctx);
  }
  Tensor future;
  Tensor pooled = encode(batch, ctx, ctx.training, &future);
  Tensor h = drop_.forward(pooled, arena, ctx.training, mix_seed(ctx.dropout_seed, 0x4ead));
  Tensor out = head_->forward(h, arena);
  if (future_head_) {
    const Tensor f = future_head_->forward(future, arena);
    params_.backend().add(out.f32(), f.f32(), out.f32(), static_cast<size_t>(out.numel()));
  }
  residual_.add_to(batch.inputs, out);
  return quantiles_.forward(out, arena);
}

Tensor Forecaster::embed(const Batch& batch, StepContext& ctx) { return encode(batch, ctx, false, nullptr); }

// The RNN's top layer [T, N, F] (time major) as one vector per sample. A whole window's last step
// is a contiguous block of it, read in place; every other pooling takes the batch-first copy
// nn/sequence_pool.h reads (the one pooling the encoders share).
Tensor Forecaster::pool(const Tensor& top, std::span<const int64_t> lengths, Arena& arena) {
  top_shape_ = top.shape;
  in_place_ = pool_.kind() == PoolKind::last && lengths.empty();
  const int64_t T = top.dim(0);
  if (in_place_) return top.slice0(T - 1, T).reshape({top.dim(1), top.dim(2)});
  Backend& backend = params_.backend();
  return pool_.forward(transpose01(backend, top, arena), lengths, padding_mask(lengths, T, arena, backend), arena);
}

Tensor Forecaster::unpool(const Tensor& dpooled, Arena& arena) {
  Backend& backend = params_.backend();
  if (!in_place_) return transpose01(backend, pool_.backward(dpooled, arena), arena);
  Tensor dtop = arena.zeros(top_shape_);
  const int64_t T = top_shape_[0];
  backend.copy(dpooled.f32(), dtop.f32() + (T - 1) * top_shape_[1] * top_shape_[2], static_cast<size_t>(dpooled.numel()));
  return dtop;
}

void Forecaster::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  if (recon_) {
    const Tensor dtop = transpose01(params_.backend(), recon_->backward(ctx), arena);
    const Tensor dx = rnn_.backward(dtop, arena, recon_->wants_input_grad());
    recon_->input_backward(dx);
    ctx.note_scratch(rnn_.checkpoint_scratch_bytes());
    return;
  }
  const Tensor dout = quantiles_.backward(ctx.output_grad, arena);
  if (future_head_) future_head_->backward(dout, arena);  // its weight's gradient; the input is data
  const Tensor dh = head_->backward(dout, arena);
  // The heads are the buffer's tail (registered after the RNN) and final now.
  grads_final_from(params_, "head.");
  // A frozen RNN (fine-tuning's first epochs) needs no gradient at all: its backward, most of
  // the step's work, is skipped.
  if (params_.all_frozen("rnn.")) return;
  Tensor dpooled = drop_.backward(dh, arena);
  rnn_.backward(unpool(dpooled, arena), arena, false, /*report_ready=*/true);
  ctx.note_scratch(rnn_.checkpoint_scratch_bytes());
}

}  // namespace seqtrain
