// TransformerBlock forward/backward, with and without recomputation. See transformer_block.h.
#include "nn/transformer_block.h"
#include "core/trace.h"

namespace seqtrain {

// out = a + b, the float sum, in one pass (Backend::add).
Tensor residual_add(Backend& backend, const Tensor& a, const Tensor& b, Arena& arena) {
  ST_CHECK(a.shape == b.shape, "residual add of {} and {}", shape_str(a.shape), shape_str(b.shape));
  Tensor out = arena.tensor(a.shape);
  backend.add(a.f32(), b.f32(), out.f32(), static_cast<size_t>(a.numel()));
  return out;
}

namespace {
Tensor copy_to(Backend& backend, const Tensor& x, Arena& arena) {
  Tensor out = arena.tensor(x.shape);
  backend.copy(x.f32(), out.f32(), static_cast<size_t>(x.numel()));
  return out;
}

std::string under(const std::string& prefix, const std::string& name) { return prefix + "." + name; }
}  // namespace

TransformerBlock::TransformerBlock(ParamStore& params, const std::string& prefix, const TransformerBlockOptions& o)
    : options_(o),
      backend_(params.backend()),
      ln_1_(params, under(prefix, o.names.ln_1), o.n_embd, o.bias),
      attn_(params, under(prefix, o.names.attn), o.n_embd,
            SelfAttentionOptions{.n_head = o.n_head, .causal = o.causal, .bias = o.bias, .attn_dropout = o.dropout,
                                 .resid_dropout = o.dropout, .precision = o.compute, .names = o.names.attn_names}),
      ln_2_(params, under(prefix, o.names.ln_2), o.n_embd, o.bias),
      fc_(params, under(prefix, o.names.fc), o.n_embd, 4 * o.n_embd, o.bias, o.compute),
      gelu_(ActKind::gelu, &params.backend()),
      // Under bf16 the layers before a Linear (ln_1, ln_2, GELU) write its rounded input directly:
      // half the traffic of an fp32 output converted afterwards.
      half_out_(half_output_type(params.backend(), o.compute)),
      gelu_out_(o.dropout_after_gelu && o.dropout > 0.f ? DType::f32 : half_out_),
      act_drop_(o.dropout_after_gelu ? o.dropout : 0.f, &params.backend()),
      proj_(params, under(prefix, o.names.proj), 4 * o.n_embd, o.n_embd, o.bias, o.compute),
      mlp_drop_(o.dropout, &params.backend()) {}

void TransformerBlock::init(Rng& rng) {
  ln_1_.init();
  attn_.init(rng);
  ln_2_.init();
  fc_.init(rng);
  proj_.init(rng);
}

Tensor TransformerBlock::forward_layers(const Tensor& x, Arena& arena, bool training, DropoutSeed seed) {
  Tensor h = attn_.forward(ln_1_.forward(x, arena, half_out_), arena, training, mix_seed(seed, 1), mask_,
                          packing_);
  Tensor x1 = residual_add(backend_, x, h, arena);
  Tensor a = gelu_.forward(fc_.forward(ln_2_.forward(x1, arena, half_out_), arena), arena, gelu_out_);
  Tensor m = proj_.forward(act_drop_.forward(a, arena, training, mix_seed(seed, 3)), arena);
  m = mlp_drop_.forward(m, arena, training, mix_seed(seed, 2));
  return residual_add(backend_, x1, m, arena);
}

Tensor TransformerBlock::backward_layers(const Tensor& dy, Arena& arena) {
  // dy flows unchanged through both residual adds; each branch's input gradient joins it.
  Tensor da = act_drop_.backward(proj_.backward(mlp_drop_.backward(dy, arena), arena), arena);
  Tensor dm = fc_.backward(gelu_.backward(da, arena), arena);
  Tensor dx1 = residual_add(backend_, dy, ln_2_.backward(dm, arena), arena);
  Tensor dh = attn_.backward(dx1, arena);
  return residual_add(backend_, dx1, ln_1_.backward(dh, arena), arena);
}

Tensor TransformerBlock::forward(const Tensor& x, Arena& arena, Arena& scratch, bool training, DropoutSeed seed,
                                 const uint8_t* key_padding_mask, const TokenPacking* packing) {
  ST_TRACE("block.forward", "layer", [&] { return trace::shape_args(x.shape); });
  mask_ = key_padding_mask;
  packing_ = packing;
  if (!options_.checkpoint || !training) return forward_layers(x, arena, training, seed);
  x_saved_ = x;
  training_ = training;
  seed_ = seed;
  scratch.reset();
  return copy_to(backend_, forward_layers(x, scratch, training, seed), arena);
}

Tensor TransformerBlock::backward(const Tensor& dy, Arena& arena, Arena& scratch) {
  ST_TRACE("block.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  if (!options_.checkpoint || !training_) return backward_layers(dy, arena);
  scratch.reset();
  forward_layers(x_saved_, scratch, training_, seed_);
  return copy_to(backend_, backward_layers(dy, scratch), arena);
}

std::vector<std::unique_ptr<TransformerBlock>> make_blocks(ParamStore& params, const std::string& prefix, int64_t n,
                                                           const TransformerBlockOptions& options) {
  std::vector<std::unique_ptr<TransformerBlock>> blocks;
  for (int64_t i = 0; i < n; ++i)
    blocks.push_back(std::make_unique<TransformerBlock>(params, prefix + "." + std::to_string(i), options));
  return blocks;
}

}  // namespace seqtrain
