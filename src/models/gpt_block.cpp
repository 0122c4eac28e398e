// GptBlock forward/backward, with and without recomputation. See gpt_block.h.
#include "models/gpt_block.h"

#include <cstring>

namespace seqtrain {

DType half_output_type(const Backend& backend, DType compute) {
  return compute != DType::f32 && backend.supports(BackendOp::half_output) ? compute : DType::f32;
}

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
}  // namespace

GptBlock::GptBlock(ParamStore& params, const std::string& prefix, const GptBlockOptions& o)
    : options_(o),
      backend_(params.backend()),
      ln_1_(params, prefix + ".ln_1", o.n_embd, o.bias),
      attn_(params, prefix + ".attn", o.n_embd,
            CausalSelfAttentionOptions{.n_head = o.n_head, .bias = o.bias, .attn_dropout = o.dropout,
                                       .resid_dropout = o.dropout, .precision = o.compute}),
      ln_2_(params, prefix + ".ln_2", o.n_embd, o.bias),
      c_fc_(params, prefix + ".mlp.c_fc", o.n_embd, 4 * o.n_embd, o.bias, o.compute),
      gelu_(ActKind::gelu, &params.backend()),
      // Under bf16 the layers before a Linear (ln_1, ln_2, GELU) write its rounded input directly:
      // half the traffic of an fp32 output converted afterwards.
      half_out_(half_output_type(params.backend(), o.compute)),
      c_proj_(params, prefix + ".mlp.c_proj", 4 * o.n_embd, o.n_embd, o.bias, o.compute),
      mlp_drop_(o.dropout, &params.backend()) {}

Tensor GptBlock::forward_layers(const Tensor& x, Arena& arena, bool training, uint64_t seed) {
  Tensor h = attn_.forward(ln_1_.forward(x, arena, half_out_), arena, training, mix_seed(seed, 1));
  Tensor x1 = residual_add(backend_, x, h, arena);
  Tensor m = c_proj_.forward(gelu_.forward(c_fc_.forward(ln_2_.forward(x1, arena, half_out_), arena), arena, half_out_),
                             arena);
  m = mlp_drop_.forward(m, arena, training, mix_seed(seed, 2));
  return residual_add(backend_, x1, m, arena);
}

Tensor GptBlock::backward_layers(const Tensor& dy, Arena& arena) {
  // dy flows unchanged through both residual adds; each branch's input gradient joins it.
  Tensor dm = c_fc_.backward(gelu_.backward(c_proj_.backward(mlp_drop_.backward(dy, arena), arena), arena), arena);
  Tensor dx1 = residual_add(backend_, dy, ln_2_.backward(dm, arena), arena);
  Tensor da = attn_.backward(dx1, arena);
  return residual_add(backend_, dx1, ln_1_.backward(da, arena), arena);
}

Tensor GptBlock::forward(const Tensor& x, Arena& arena, Arena& scratch, bool training, uint64_t seed) {
  if (!options_.checkpoint || !training) return forward_layers(x, arena, training, seed);
  x_saved_ = x;
  training_ = training;
  seed_ = seed;
  scratch.reset();
  return copy_to(backend_, forward_layers(x, scratch, training, seed), arena);
}

Tensor GptBlock::backward(const Tensor& dy, Arena& arena, Arena& scratch) {
  if (!options_.checkpoint || !training_) return backward_layers(dy, arena);
  scratch.reset();
  forward_layers(x_saved_, scratch, training_, seed_);
  return copy_to(backend_, backward_layers(dy, scratch), arena);
}

}  // namespace seqtrain
