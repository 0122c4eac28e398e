// TransformerEncoder forward/backward and initialisation. See transformer_encoder.h.
#include "models/transformer_encoder.h"

#include "models/registry.h"

namespace seqtrain {
namespace {

// The spec's tokens per sample (plus the cls token), after the checks only data can fail.
int64_t tokens_of(const ModelSpec& s) {
  ST_CHECK(s.patch_size >= 1 && s.lookback % s.patch_size == 0,
           "config key 'model.patch_size' is {}, which does not divide the {} steps of each sample: pick a divisor of "
           "{} (or change the window length)", s.patch_size, s.lookback, s.lookback);
  ST_CHECK(s.future_steps == 0, "data.future_features cannot be used with model.type transformer (it reads the "
           "window only): use model.type lstm, gru or mlp, or drop data.future_features");
  if (auto p = heads_problem(s)) fail("{}", p->second);
  return s.lookback / s.patch_size + (s.pooling == "cls" ? 1 : 0);
}

PositionKind positions_of(const ModelSpec& s) { return position_kind(s.positions == "auto" ? "learned" : s.positions); }

TransformerBlockOptions block_options(const ModelSpec& s, const Precision& precision) {
  return TransformerBlockOptions{.n_embd = s.hidden,
                                 .n_head = s.heads,
                                 .causal = false,
                                 .bias = s.bias,
                                 .dropout = s.dropout,
                                 .dropout_after_gelu = true,
                                 .compute = precision.compute,
                                 .checkpoint = s.grad_checkpoint,
                                 .names = TransformerBlockNames::torch_encoder()};
}

void normal_fill(float* p, int64_t n, float sd, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) p[i] = sd * rng.normal();
}
}  // namespace

TransformerEncoder::TransformerEncoder(const ModelSpec& spec, const ModelEnv& env)
    : Model(spec, env),
      patch_(spec.patch_size),
      cls_(spec.pooling == "cls"),
      input_proj_(params_, "input_proj", spec.patch_size * spec.input_size, spec.hidden),
      cls_token_(cls_ ? std::optional<size_t>(params_.add("cls_token", {1, 1, spec.hidden})) : std::nullopt),
      positions_(params_, "pos_embed", positions_of(spec), tokens_of(spec), spec.hidden),
      drop_(spec.dropout, &params_.backend()),
      blocks_(make_blocks(params_, "encoder.layers", spec.layers, block_options(spec, env.precision))),
      ln_f_(params_, "encoder.norm", spec.hidden, spec.bias),
      pool_(params_.backend(), pool_kind(spec.pooling)),
      top_(params_, spec, spec.hidden, spec.patch_size * spec.input_size) {
  if (spec.reconstruct) {
    ST_CHECK(!cls_, "config key 'model.pooling' is cls, which masked pretraining does not train: use mean or last");
    pack_ = false;  // the decoder reads every token in place
  }
  scratch_.set_backend(params_.backend());
  finish_params();
}

// PyTorch's defaults for the Linear and LayerNorm layers; the cls token and a learned position
// table normal(0, 0.02) as BERT and ViT (an nn.Embedding's N(0, 1) would swamp the projected
// inputs).
void TransformerEncoder::init_params(Rng& rng) {
  input_proj_.init(rng);
  if (cls_token_) normal_fill(params_.param(*cls_token_).f32(), spec_.hidden, 0.02f, rng);
  if (positions_.kind() == PositionKind::learned) {
    const size_t w = positions_.weight();
    normal_fill(params_.param(w).f32(), numel_of(params_.entries()[w].shape), 0.02f, rng);
  }
  for (auto& b : blocks_) b->init(rng);
  ln_f_.init();
  top_.init(rng);
}

const uint8_t* TransformerEncoder::token_mask(const Batch& batch, const StepContext& ctx, int64_t T) {
  return row_padding(host_lengths(batch, ctx), batch.inputs.dim(0), T, patch_, cls_ ? 1 : 0, "transformer", valid_,
                     ctx.arena, params_.backend());
}

// Patches -> blocks -> final norm -> pooling over the valid tokens: what the head reads.
Tensor TransformerEncoder::encode(const Batch& batch, StepContext& ctx, bool training, bool pooled) {
  Arena& arena = ctx.arena;
  const Tensor& x = batch.inputs;
  ST_CHECK(x.shape.size() == 3 && x.dim(2) == spec_.input_size && x.dim(1) <= spec_.lookback && x.contiguous(),
           "transformer input must be a contiguous [batch, steps <= {}, {}], got {}", spec_.lookback, spec_.input_size,
           shape_str(x.shape));
  const int64_t B = x.dim(0), T = x.dim(1);
  ST_CHECK(T % patch_ == 0, "config key 'model.patch_size' is {}, which does not divide the batch's {} steps: pick a "
           "divisor of {}", patch_, T, T);
  const uint8_t* mask = token_mask(batch, ctx, T);
  const Tensor xin = top_.recon() ? top_.recon()->mask_inputs(batch, arena) : x;
  Tensor h = input_proj_.forward(xin.reshape({B, T / patch_, patch_ * spec_.input_size}), arena);
  if (cls_) h = prepend_cls(h, arena);
  positions_.add(h, arena);
  h = drop_.forward(h, arena, training, mix_seed(ctx.dropout_seed, 0xe3b));
  packing_.reset();
  if (mask && pack_) {
    packing_.emplace(valid_, h.dim(1));
    h = packing_->gather(params_.backend(), h, arena);
  }
  const TokenPacking* packing = packing_ ? &*packing_ : nullptr;
  for (size_t l = 0; l < blocks_.size(); ++l)
    h = blocks_[l]->forward(h, arena, scratch_, training, mix_seed(ctx.dropout_seed, l), mask, packing);
  h = ln_f_.forward(h, arena);
  if (!pooled) return h;
  return packing ? pool_.forward(h, *packing, arena) : pool_.forward(h, valid_, mask, arena);
}

Tensor TransformerEncoder::forward(const Batch& batch, StepContext& ctx) {
  return top_.forward(batch, ctx, [&](bool pooled) { return encode(batch, ctx, ctx.training, pooled); }, valid_);
}

Tensor TransformerEncoder::embed(const Batch& batch, StepContext& ctx) { return encode(batch, ctx, false); }

void TransformerEncoder::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  ReconstructionHead* recon = top_.recon();
  Tensor dtop = top_.backward(ctx);
  // With the whole encoder frozen (fine-tuning's first epochs) nothing below the head needs a
  // gradient: the pooling, final norm and blocks' backward are skipped.
  if (dtop.ptr == nullptr) return;
  if (!recon) dtop = pool_.backward(dtop, arena);
  Tensor dh = ln_f_.backward(dtop, arena);
  for (size_t l = blocks_.size(); l-- > 0;) dh = blocks_[l]->backward(dh, arena, scratch_);
  if (packing_) dh = packing_->scatter(params_.backend(), dh, arena);
  dh = drop_.backward(dh, arena);
  positions_.backward(dh, arena);
  if (cls_) dh = cls_backward(dh, arena);
  const Tensor dx = input_proj_.backward(dh, arena);  // the input is data, but a mask token learns from it
  if (recon) recon->input_backward(dx);
  ctx.note_scratch(spec_.grad_checkpoint ? scratch_.high_water() : 0);
}

Tensor TransformerEncoder::prepend_cls(const Tensor& h, Arena& arena) {
  const int64_t B = h.dim(0), N = h.dim(1), C = h.dim(2);
  Tensor out = arena.tensor({B, N + 1, C});
  Backend& be = params_.backend();
  for (int64_t b = 0; b < B; ++b) {
    be.copy(params_.param(*cls_token_).f32(), out.f32() + b * (N + 1) * C, static_cast<size_t>(C));
    be.copy(h.f32() + b * N * C, out.f32() + (b * (N + 1) + 1) * C, static_cast<size_t>(N * C));
  }
  return out;
}

Tensor TransformerEncoder::cls_backward(const Tensor& dh, Arena& arena) {
  const int64_t B = dh.dim(0), N = dh.dim(1) - 1, C = dh.dim(2);
  Tensor out = arena.tensor({B, N, C});
  Backend& be = params_.backend();
  for (int64_t b = 0; b < B; ++b) {
    be.axpy(1.f, dh.f32() + b * (N + 1) * C, params_.grad(*cls_token_).f32(), static_cast<size_t>(C));
    be.copy(dh.f32() + (b * (N + 1) + 1) * C, out.f32() + b * N * C, static_cast<size_t>(N * C));
  }
  return out;
}

}  // namespace seqtrain
