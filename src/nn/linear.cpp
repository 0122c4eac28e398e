// Linear forward/backward over the Backend's row-major GEMM. See linear.h.
//   forward:  y[N,out]   = x[N,in] W[out,in]^T + b
//   backward: dx[N,in]   = dy[N,out] W[out,in]
//             dW[out,in] += dy[N,out]^T x[N,in]
//             db[out]    += sum over rows of dy
#include "nn/linear.h"

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

void WeightProduct::forward(const Tensor& x, const float* w, int64_t out, bool accumulate, float* y, Arena& arena) {
  const int64_t in = x.dim(-1), N = x.numel() / in;
  const float beta = accumulate ? 1.f : 0.f;
  x_ = x;
  out_ = out;
  if (compute_ == DType::f32) {
    be_->gemm(DType::f32, false, true, N, out, in, 1.f, x.f32(), in, w, in, beta, y, out);
    return;
  }
  x16_ = to_half(*be_, compute_, x.f32(), N, in, arena);
  w16_ = to_half(*be_, compute_, w, out, in, arena);
  if (N > 0) be_->gemm(compute_, false, true, N, out, in, 1.f, x16_.ptr, in, w16_.ptr, in, beta, y, out);
}

void WeightProduct::backward(const float* dy, const float* w, float* dw, float* dx, Arena& arena) {
  ST_CHECK(x_.ptr != nullptr, "WeightProduct: backward called before forward");
  const int64_t in = x_.dim(-1), N = x_.numel() / in, out = out_;
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

Linear::Linear(ParamStore& p, const std::string& prefix, int64_t in_, int64_t out_, bool bias_, DType compute)
    : params(p), in(in_), out(out_), has_bias(bias_), product(p.backend(), compute, "Linear '" + prefix + "'") {
  ST_CHECK(in > 0 && out > 0, "Linear '{}': in_features={} and out_features={} must both be positive", prefix,
           in, out);
  weight = params.add(prefix + ".weight", {out, in});
  if (has_bias) bias = params.add(prefix + ".bias", {out});
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
  ST_CHECK(!x.shape.empty() && x.dim(-1) == in && x.contiguous(),
           "Linear: input {} does not match weight [{}, {}]: expected a contiguous [..., {}]", shape_str(x.shape),
           out, in, in);
  const int64_t N = x.numel() / in;
  Shape ys = x.shape;
  ys.back() = out;
  Tensor y = arena.tensor(ys);
  // Seed every row with the bias and let the GEMM add onto it: one pass over y instead of two.
  if (has_bias) params.backend().bias_rows(params.param(bias).f32(), y.f32(), N, out);
  product.forward(x, params.param(weight).f32(), out, has_bias, y.f32(), arena);
  return y;
}

Tensor Linear::backward(const Tensor& dy, Arena& arena) {
  const Tensor& x = product.input();
  ST_CHECK(x.ptr != nullptr, "Linear: backward called before forward");
  Shape want = x.shape;
  want.back() = out;
  ST_CHECK(dy.shape == want && dy.contiguous(), "Linear: gradient {} does not match the output shape {}",
           shape_str(dy.shape), shape_str(want));
  const int64_t N = x.numel() / in;
  if (has_bias) params.backend().bias_grad(dy.f32(), params.grad(bias).f32(), N, out);
  Tensor dx = arena.tensor(x.shape);
  product.backward(dy.f32(), params.param(weight).f32(), params.grad(weight).f32(), dx.f32(), arena);
  return dx;
}

}  // namespace seqtrain
