// CnnEncoder forward/backward and initialisation. See cnn_encoder.h.
#include "models/cnn_encoder.h"

#include <fmt/format.h>

#include "nn/grad_ready.h"

namespace seqtrain {
namespace {
// The checks only a spec (not a config) can fail: what make_blocks needs.
const ModelSpec& checked(const ModelSpec& s) {
  ST_CHECK(!s.kernel_sizes.empty(), "config key 'model.kernel_sizes' is empty: list one kernel size per conv layer, "
           "like [8, 5, 3]");
  for (int64_t k : s.kernel_sizes)
    ST_CHECK(k >= 1, "config key 'model.kernel_sizes' holds {}: each kernel size must be >= 1, like [8, 5, 3]", k);
  ST_CHECK(s.norm == "layer" || s.norm == "batch",
           "config key 'model.norm' is '{}': use layer (LayerNorm, the default) or batch (BatchNorm1d)", s.norm);
  ST_CHECK(s.future_steps == 0, "data.future_features cannot be used with model.type cnn (it reads the window only): "
           "use model.type lstm, gru or mlp, or drop data.future_features");
  return s;
}
}  // namespace

CnnEncoder::CnnEncoder(const ModelSpec& spec, const ModelEnv& env)
    : Model(checked(spec), env),
      pool_(params_.backend(), pool_kind(spec.pooling)) {
  Backend* be = &params_.backend();
  blocks_.reserve(spec.kernel_sizes.size());  // the layers keep references into their ParamStore only
  for (size_t i = 0; i < spec.kernel_sizes.size(); ++i) {
    blocks_.push_back(Block{Conv1d(params_, fmt::format("convs.{}", i), i == 0 ? spec.input_size : spec.hidden,
                                   spec.hidden, spec.kernel_sizes[i]),
                            std::nullopt, std::nullopt, Activation(ActKind::relu, be), Dropout(spec.dropout, be)});
    const std::string norm = fmt::format("norms.{}", i);
    if (spec.norm == "batch") blocks_.back().batch_norm.emplace(params_, norm, spec.hidden);
    else blocks_.back().layer_norm.emplace(params_, norm, spec.hidden);
  }
  top_.emplace(params_, spec, spec.hidden, spec.input_size);  // the buffer's tail
  finish_params();
}

// torch's defaults: Conv1d and Linear uniform in +-1/sqrt(fan_in), LayerNorm and BatchNorm weight 1,
// bias 0 (BatchNorm's running mean 0, variance 1).
void CnnEncoder::init_params(Rng& rng) {
  for (Block& b : blocks_) {
    b.conv.init(rng);
    if (b.layer_norm) b.layer_norm->init();
    else b.batch_norm->init();
  }
  top_->init(rng);
}

Tensor CnnEncoder::encode(const Batch& batch, StepContext& ctx, bool training, bool pooled) {
  Arena& arena = ctx.arena;
  const Tensor& x = batch.inputs;
  ST_CHECK(x.shape.size() == 3 && x.dim(2) == spec_.input_size && x.dim(1) >= 1 && x.dim(1) <= spec_.lookback &&
               x.contiguous(),
           "cnn input must be a contiguous [batch, 1 to {} steps, {}], got {}", spec_.lookback, spec_.input_size,
           shape_str(x.shape));
  const int64_t B = x.dim(0), T = x.dim(1);
  mask_ = row_padding(host_lengths(batch, ctx), B, T, 1, 0, "cnn", valid_, arena, params_.backend());
  valid_rows_ = B * T;
  if (!valid_.empty()) {
    valid_rows_ = 0;
    for (int64_t v : valid_) valid_rows_ += v;
  }
  Tensor h = top_->recon() ? top_->recon()->mask_inputs(batch, arena) : x;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    h = b.conv.forward(h, mask_, arena);
    h = b.layer_norm ? b.layer_norm->forward(h, arena) : b.batch_norm->forward(h, mask_, valid_rows_, training, arena);
    h = b.relu.forward(h, arena);
    h = b.drop.forward(h, arena, training, mix_seed(ctx.dropout_seed, i));
  }
  if (!pooled) return h;
  return pool_.forward(h, valid_, mask_, arena);
}

Tensor CnnEncoder::forward(const Batch& batch, StepContext& ctx) {
  return top_->forward(batch, ctx, [&](bool pooled) { return encode(batch, ctx, ctx.training, pooled); }, valid_);
}

Tensor CnnEncoder::embed(const Batch& batch, StepContext& ctx) { return encode(batch, ctx, false); }

void CnnEncoder::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  ReconstructionHead* recon = top_->recon();
  Tensor dh = top_->backward(ctx);
  grads_final_from(params_, recon ? "decoder." : "head.");  // the buffer's tail, final now
  // With the whole encoder frozen (fine-tuning's first epochs) nothing below the head needs a
  // gradient: the pooling and every block's backward are skipped.
  if (dh.ptr == nullptr) return;
  if (!recon) dh = pool_.backward(dh, arena);
  // The input is data: its gradient only feeds a mask token, when there is one.
  const bool token_grad = recon && recon->wants_input_grad();
  for (size_t i = blocks_.size(); i-- > 0;) {
    Block& b = blocks_[i];
    dh = b.relu.backward(b.drop.backward(dh, arena), arena);
    dh = b.layer_norm ? b.layer_norm->backward(dh, arena) : b.batch_norm->backward(dh, arena);
    dh = b.conv.backward(dh, arena, i > 0 || token_grad);
    // This block's tensors and all after them are final — but for a mask token (registered after
    // the blocks), whose gradient comes from the input's, last.
    if (!token_grad) grads_final_from(params_, fmt::format("convs.{}.", i));
  }
  if (token_grad) {
    recon->input_backward(dh);
    grads_final_from(0);
  }
}

}  // namespace seqtrain
