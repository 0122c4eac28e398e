// Gpt forward/backward, nanoGPT's initialisation and the spec checks. See gpt.h; generation
// with the KV cache is in gpt_generate.cpp.
#include "models/gpt.h"
#include "nn/grad_ready.h"

#include <cmath>

#include "backend/backend.h"
#include "models/registry.h"
#include "models/token_ids.h"

namespace seqtrain {

void check_gpt_spec(const ModelSpec& s, const Precision& precision) {
  if (auto p = heads_problem(s)) fail("{}", p->second);
  ST_CHECK(s.vocab_size > 0,
           "model.type gpt needs a vocabulary: it is taken from a text data source (data.source: text), got "
           "vocab_size {}", s.vocab_size);
  ST_CHECK(s.lookback >= 1, "model.type gpt needs a block size (data.block_size) of at least 1, got {}", s.lookback);
  ST_CHECK(!s.bidirectional,
           "model.bidirectional: true cannot be used with model.type gpt: its attention is causal; set "
           "model.bidirectional: false");
  ST_CHECK(precision.compute != DType::f16,
           "runtime.precision fp16 is not supported by model.type gpt (its matrix products run in fp32 or bf16); use "
           "bf16, auto or fp32");
}

namespace {
const ModelSpec& checked(const ModelSpec& s, const Precision& precision) {
  check_gpt_spec(s, precision);
  return s;
}

TransformerBlockOptions block_options(const ModelSpec& s, const Precision& precision) {
  return TransformerBlockOptions{.n_embd = s.hidden,
                                 .n_head = s.heads,
                                 .causal = true,
                                 .bias = s.bias,
                                 .dropout = s.dropout,
                                 .compute = precision.compute,
                                 .checkpoint = s.grad_checkpoint,
                                 .names = TransformerBlockNames::nanogpt()};
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

Gpt::Gpt(const ModelSpec& spec, const ModelEnv& env)
    : TextModel(checked(spec, env.precision), env),
      wte_(params_, "transformer.wte", spec.vocab_size, spec.hidden),
      wpe_(params_, "transformer.wpe", PositionKind::learned, spec.lookback, spec.hidden),
      drop_(spec.dropout, &params_.backend()),
      // Built between wpe and ln_f so the parameters register in nanoGPT's state_dict order (wte,
      // wpe, h.*, ln_f): the model file then has that order too.
      blocks_(make_blocks(params_, "transformer.h", spec.layers, block_options(spec, env.precision))),
      ln_f_(params_, "transformer.ln_f", spec.hidden, spec.bias),
      head_(params_.backend(), env.precision.compute, "gpt head (lm_head = transformer.wte)") {
  scratch_.set_backend(params_.backend());
  params_.add_alias("lm_head.weight", wte_.weight);
  finish_params();
}

void init_nanogpt(ParamStore& params, int64_t n_layer, Rng& rng) {
  const float std_all = 0.02f, std_proj = 0.02f / std::sqrt(2.f * static_cast<float>(n_layer));
  for (size_t i = 0; i < params.entries().size(); ++i) {
    const ParamEntry& e = params.entries()[i];
    float* p = params.param(i).f32();
    const int64_t n = numel_of(e.shape);
    const bool layer_norm = e.name.find(".ln_") != std::string::npos || e.name.find("ln_f.") != std::string::npos;
    if (ends_with(e.name, ".bias")) std::fill(p, p + n, 0.f);
    else if (layer_norm) std::fill(p, p + n, 1.f);
    else {
      const float sd = ends_with(e.name, "c_proj.weight") ? std_proj : std_all;
      for (int64_t k = 0; k < n; ++k) p[k] = sd * rng.normal();
    }
  }
}

void Gpt::init_params(Rng& rng) { init_nanogpt(params_, spec_.layers, rng); }

Tensor Gpt::forward(const Batch& batch, StepContext& ctx) {
  Arena& arena = ctx.arena;
  Tensor ids = token_ids(params_.backend(), batch.inputs, arena, spec_.type, spec_.vocab_size,
                         ctx.host_batch ? &ctx.host_batch->inputs : nullptr);
  B_ = ids.shape[0];
  T_ = ids.shape[1];
  ST_CHECK(T_ <= spec_.lookback, "gpt: a sequence of {} tokens is longer than the block size {} (data.block_size)",
           T_, spec_.lookback);
  Tensor x = wte_.forward(ids, arena, /*ids_checked=*/true);  // token_ids checked them: [B, T, C]
  wpe_.add(x, arena);                            // + wpe[t] on every sequence's row t
  x = drop_.forward(x, arena, ctx.training, mix_seed(ctx.dropout_seed, 0xe3b));
  for (size_t l = 0; l < blocks_.size(); ++l)
    x = blocks_[l]->forward(x, arena, scratch_, ctx.training, mix_seed(ctx.dropout_seed, l));
  return head_forward(ln_f_.forward(x, arena, half_output_type(params_.backend(), head_.compute())), arena);
}

void Gpt::backward(StepContext& ctx) {
  Arena& arena = ctx.arena;
  const Shape want{B_, T_, spec_.vocab_size};
  ST_CHECK(ctx.output_grad.numel() == numel_of(want) && ctx.output_grad.contiguous(),
           "gpt: logit gradient {} does not match logits {}", shape_str(ctx.output_grad.shape), shape_str(want));
  Tensor dx = ln_f_.backward(head_backward(ctx.output_grad.reshape(want), arena), arena);
  // nanoGPT's order (wte, wpe, h.0 .. h.L-1, ln_f): ln_f, then each block down to h.0, are
  // the buffer's tail when their backward ends (the tied wte at its start is written last).
  grads_final_from(params_, "transformer.ln_f.");
  for (size_t l = blocks_.size(); l-- > 0;) {
    dx = blocks_[l]->backward(dx, arena, scratch_);
    grads_final_from(params_, fmt::format("transformer.h.{}.", l));
  }
  dx = drop_.backward(dx, arena);
  wte_.backward(dx, arena);
  wpe_.backward(dx, arena);  // every sequence's row t into wpe row t
  ctx.note_scratch(spec_.grad_checkpoint ? scratch_.high_water() : 0);
}

// logits[N, V] = x[N, C] wte[V, C]^T, N = B*T.
Tensor Gpt::head_forward(const Tensor& x, Arena& arena) {
  Tensor logits = arena.tensor({B_, T_, spec_.vocab_size});
  head_.forward(x, params_.param(wte_.weight).f32(), nullptr, spec_.vocab_size, logits.f32(), arena);
  return logits;
}

// dx[N, C] = dlogits[N, V] wte; dwte[V, C] += dlogits^T x (added to the embedding's own gradient).
Tensor Gpt::head_backward(const Tensor& dlogits, Arena& arena) {
  Tensor dx = arena.tensor({B_, T_, spec_.hidden});
  head_.backward(dlogits.f32(), params_.param(wte_.weight).f32(), params_.grad(wte_.weight).f32(), nullptr, dx.f32(), arena);
  return dx;
}

}  // namespace seqtrain
