// Activation names and the layer over the Backend's activation op. See activation.h. The
// formulas (for the record; backend/activation_loops.cpp and the CPU's GELU kernel compute them):
//   relu'(x)     = [x > 0]                       (0 at x = 0, as torch)
//   tanh'(x)     = 1 - y^2
//   sigmoid'(x)  = y (1 - y)
//   gelu'(x)     = Phi(x) + x phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi)
//   gelu_tanh'   = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2),  t = tanh(c (x + k x^3)),
//                  c = sqrt(2/pi), k = 0.044715
#include "nn/activation.h"
#include "core/trace.h"

#include "backend/backend.h"


namespace seqtrain {

ActKind parse_activation(const std::string& name) {
  if (name == "relu") return ActKind::relu;
  if (name == "tanh") return ActKind::tanh;
  if (name == "sigmoid") return ActKind::sigmoid;
  if (name == "gelu") return ActKind::gelu;
  if (name == "gelu_tanh") return ActKind::gelu_tanh;
  fail("unknown activation '{}': valid names are relu, tanh, sigmoid, gelu (exact erf), gelu_tanh", name);
}

std::string_view activation_name(ActKind k) {
  switch (k) {
    case ActKind::relu: return "relu";
    case ActKind::tanh: return "tanh";
    case ActKind::sigmoid: return "sigmoid";
    case ActKind::gelu: return "gelu";
    case ActKind::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

void activation_forward(ActKind k, const float* x, float* y, int64_t n, Backend& backend) {
  backend.activation_forward(k, x, y, n);
}

void activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         Backend& backend) {
  backend.activation_backward(k, x, y, dy, dx, n);
}

Tensor Activation::forward(const Tensor& x, Arena& arena) { return forward(x, arena, DType::f32); }

Tensor Activation::forward(const Tensor& x, Arena& arena, DType out) {
  ST_TRACE("activation.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(out == DType::f32 || kind == ActKind::gelu || kind == ActKind::gelu_tanh,
           "{}: a 16-bit output is for GELU only (the others' backward reads the output)", activation_name(kind));
  ST_CHECK(x.contiguous(), "{}: input {} must be contiguous", activation_name(kind), shape_str(x.shape));
  Tensor y = arena.tensor(x.shape, out);
  if (out == DType::f32) backend().activation_forward(kind, x.f32(), y.f32(), x.numel());
  else backend().activation_forward_half(kind, x.f32(), out, y.ptr, x.numel());
  x_saved = x;
  y_saved = y;
  return y;
}

Tensor Activation::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("activation.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(y_saved.ptr != nullptr, "{}: backward called before forward", activation_name(kind));
  ST_CHECK(dy.shape == y_saved.shape && dy.contiguous(), "{}: gradient {} does not match the output shape {}",
           activation_name(kind), shape_str(dy.shape), shape_str(y_saved.shape));
  Tensor dx = arena.tensor(dy.shape);
  // A 16-bit y (forward's `out`) is GELU's, whose backward reads only x.
  const float* y = y_saved.dtype == DType::f32 ? y_saved.f32() : nullptr;
  backend().activation_backward(kind, x_saved.f32(), y, dy.f32(), dx.f32(), dy.numel());
  return dx;
}

}  // namespace seqtrain
