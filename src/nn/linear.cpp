// Linear forward/backward over the Backend's row-major GEMM. See linear.h.
//   forward:  y[N,out]   = x[N,in] W[out,in]^T + b
//   backward: dx[N,in]   = dy[N,out] W[out,in]
//             dW[out,in] += dy[N,out]^T x[N,in]
//             db[out]    += sum over rows of dy
#include "nn/linear.h"
#include "core/trace.h"

#include <cmath>

#include "backend/backend.h"

namespace seqtrain {

namespace {
BackendOp gemm_op(DType t) {
  return t == DType::bf16 ? BackendOp::gemm_bf16 : t == DType::f16 ? BackendOp::gemm_f16 : BackendOp::gemm_f32;
}

// n floats rounded to `t` into the arena, as a [rows, cols] tensor of 16-bit bits.
Tensor to_half(Backend& be, DType t, const float* src, int64_t rows, int64_t cols, Arena& arena) {
  Tensor h = arena.tensor({rows, cols}, t);
  be.convert(DType::f32, src, t, h.ptr, static_cast<size_t>(rows * cols));
  return h;
}
}  // namespace

WeightProduct::WeightProduct(Backend& backend, DType compute, const std::string& what)
    : be_(&backend), compute_(compute) {
  ST_CHECK(compute == DType::f32 || compute == DType::bf16 || compute == DType::f16,
           "{}: matrix products in {} are not supported: use f32, bf16 or f16", what, dtype_name(compute));
  backend.require(gemm_op(compute), "(" + what + ")");
}

void WeightProduct::forward(const Tensor& x, const float* w, const float* bias, int64_t out, float* y, Arena& arena) {
  const int64_t in = x.dim(-1), N = x.numel() / in;
  x_ = x;
  out_ = out;
  const void* a = nullptr;
  const void* b = w;
  if (compute_ == DType::f32) {
    a = x.f32();  // checks an fp32 x
  } else {
    x16_ = x.dtype == compute_ ? x : to_half(*be_, compute_, x.f32(), N, in, arena);
    w16_ = to_half(*be_, compute_, w, out, in, arena);
    a = x16_.ptr;
    b = w16_.ptr;
  }
  if (N == 0) return;
  if (bias != nullptr) be_->gemm_bias(compute_, false, true, N, out, in, a, in, b, in, bias, y, out);
  else be_->gemm(compute_, false, true, N, out, in, 1.f, a, in, b, in, 0.f, y, out);
}

void WeightProduct::backward(const float* dy, const float* w, float* dw, float* db, float* dx, Arena& arena) {
  ST_CHECK(x_.ptr != nullptr, "WeightProduct: backward called before forward");
  const int64_t in = x_.dim(-1), N = x_.numel() / in, out = out_;
  if (db != nullptr) be_->bias_grad(dy, db, N, out);
  if (compute_ == DType::f32) {
    be_->gemm(DType::f32, true, false, out, in, N, 1.f, dy, out, x_.f32(), in, 1.f, dw, in);
    be_->gemm(DType::f32, false, false, N, in, out, 1.f, dy, out, w, in, 0.f, dx, in);
    return;
  }
  if (N == 0) return;  // nothing to add to dW, and dx has no rows
  Tensor dy16 = to_half(*be_, compute_, dy, N, out, arena);
  be_->gemm(compute_, true, false, out, in, N, 1.f, dy16.ptr, out, x16_.ptr, in, 1.f, dw, in);
  be_->gemm(compute_, false, false, N, in, out, 1.f, dy16.ptr, out, w16_.ptr, in, 0.f, dx, in);
}

DType half_output_type(const Backend& backend, DType compute) {
  return compute != DType::f32 && backend.supports(BackendOp::half_output) ? compute : DType::f32;
}

Linear::Linear(ParamStore& p, const std::string& prefix, int64_t in_, int64_t out_, bool bias_, DType compute)
    : Linear(p, prefix + ".weight", prefix + ".bias", in_, out_, bias_, compute) {}

namespace {
// How messages name a Linear: its prefix, or its weight's name when that has no ".weight" suffix.
std::string linear_label(const std::string& weight_name) {
  const std::string tail = ".weight";
  const bool suffixed = weight_name.size() > tail.size() &&
                        weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) == 0;
  return "Linear '" + (suffixed ? weight_name.substr(0, weight_name.size() - tail.size()) : weight_name) + "'";
}
}  // namespace

Linear::Linear(ParamStore& p, const std::string& weight_name, const std::string& bias_name, int64_t in_, int64_t out_,
               bool bias_, DType compute)
    : params(p), in(in_), out(out_), has_bias(bias_), product(p.backend(), compute, linear_label(weight_name)) {
  ST_CHECK(in > 0 && out > 0, "{}: in_features={} and out_features={} must both be positive", linear_label(weight_name),
           in, out);
  weight = params.add(weight_name, {out, in});
  if (has_bias) bias = params.add(bias_name, {out});
}

void Linear::init(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  float* w = params.param(weight).f32();
  for (int64_t i = 0; i < out * in; ++i) w[i] = rng.uniform(-bound, bound);
  if (has_bias) {
    float* b = params.param(bias).f32();
    for (int64_t i = 0; i < out; ++i) b[i] = rng.uniform(-bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x, Arena& arena) {
  ST_TRACE("linear.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(!x.shape.empty() && x.dim(-1) == in && x.contiguous(),
           "Linear: input {} does not match weight [{}, {}]: expected a contiguous [..., {}]", shape_str(x.shape),
           out, in, in);
  Shape ys = x.shape;
  ys.back() = out;
  Tensor y = arena.tensor(ys);
  product.forward(x, params.param(weight).f32(), has_bias ? params.param(bias).f32() : nullptr, out, y.f32(), arena);
  return y;
}

Tensor Linear::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("linear.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  const Tensor& x = product.input();
  ST_CHECK(x.ptr != nullptr, "Linear: backward called before forward");
  Shape want = x.shape;
  want.back() = out;
  ST_CHECK(dy.shape == want && dy.contiguous(), "Linear: gradient {} does not match the output shape {}",
           shape_str(dy.shape), shape_str(want));
  Tensor dx = arena.tensor(x.shape);
  product.backward(dy.f32(), params.param(weight).f32(), params.grad(weight).f32(),
                   has_bias ? params.grad(bias).f32() : nullptr, dx.f32(), arena);
  return dx;
}

}  // namespace seqtrain
