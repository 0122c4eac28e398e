// LayerNorm forward/backward over the Backend's layer_norm op (backend.h has the formulas). See
// layer_norm.h.
#include "nn/layer_norm.h"
#include "core/trace.h"

#include "backend/backend.h"

namespace seqtrain {

LayerNorm::LayerNorm(ParamStore& p, const std::string& prefix, int64_t channels_, bool bias_)
    : params(p), channels(channels_), has_bias(bias_) {
  ST_CHECK(channels > 0, "LayerNorm '{}': normalized size {} must be positive", prefix, channels);
  weight = params.add(prefix + ".weight", {channels});
  if (has_bias) bias = params.add(prefix + ".bias", {channels});
}

void LayerNorm::init() {
  float* w = params.param(weight).f32();
  for (int64_t i = 0; i < channels; ++i) w[i] = 1.f;
  if (has_bias) {
    float* b = params.param(bias).f32();
    for (int64_t i = 0; i < channels; ++i) b[i] = 0.f;
  }
}

LayerNormArgs LayerNorm::args(int64_t rows) const {
  LayerNormArgs a;
  a.rows = rows;
  a.channels = channels;
  a.eps = kEps;
  a.x = x_saved.f32();
  a.weight = params.param(weight).f32();
  a.bias = has_bias ? params.param(bias).f32() : nullptr;
  a.mean = mean;
  a.rstd = rstd;
  return a;
}

Tensor LayerNorm::forward(const Tensor& x, Arena& arena) { return forward(x, arena, DType::f32); }

Tensor LayerNorm::forward(const Tensor& x, Arena& arena, DType out) {
  ST_TRACE("layer_norm.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(!x.shape.empty() && x.dim(-1) == channels && x.contiguous(),
           "LayerNorm: input {} does not match normalized size {}: expected a contiguous [..., {}]",
           shape_str(x.shape), channels, channels);
  const int64_t rows = x.numel() / channels;
  Tensor y = arena.tensor(x.shape, out);
  mean = static_cast<float*>(arena.alloc(sizeof(float) * rows));
  rstd = static_cast<float*>(arena.alloc(sizeof(float) * rows));
  x_saved = x;
  if (rows == 0) return y;
  if (out == DType::f32) params.backend().layer_norm_forward(args(rows), y.f32());
  else params.backend().layer_norm_forward_half(args(rows), out, y.ptr);
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("layer_norm.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(x_saved.ptr != nullptr, "LayerNorm: backward called before forward");
  ST_CHECK(dy.shape == x_saved.shape && dy.contiguous(), "LayerNorm: gradient {} does not match the input {}",
           shape_str(dy.shape), shape_str(x_saved.shape));
  const int64_t rows = x_saved.numel() / channels;
  Tensor dx = arena.tensor(x_saved.shape);
  if (rows > 0)
    params.backend().layer_norm_backward(args(rows), dy.f32(), dx.f32(), params.grad(weight).f32(),
                                         has_bias ? params.grad(bias).f32() : nullptr);
  return dx;
}

}  // namespace seqtrain
