// Linear forward/backward over the Backend's row-major GEMM. See linear.h.
//   forward:  y[N,out]   = x[N,in] W[out,in]^T + b
//   backward: dx[N,in]   = dy[N,out] W[out,in]
//             dW[out,in] += dy[N,out]^T x[N,in]
//             db[out]    += sum over rows of dy
#include "nn/linear.h"

#include <cmath>

#include "backend/backend.h"

namespace seqtrain {

Linear::Linear(ParamStore& p, const std::string& prefix, int64_t in_, int64_t out_, bool bias_)
    : params(p), in(in_), out(out_), has_bias(bias_) {
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
  Backend& be = params.backend();
  const int64_t N = x.numel() / in;
  Shape ys = x.shape;
  ys.back() = out;
  Tensor y = arena.tensor(ys);
  float beta = 0.f;
  if (has_bias) {
    // Seed every row with the bias and let the GEMM add onto it: one pass over y instead of two.
    be.bias_rows(params.param(bias).f32(), y.f32(), N, out);
    beta = 1.f;
  }
  be.gemm(DType::f32, false, true, N, out, in, 1.f, x.f32(), in, params.param(weight).f32(), in, beta, y.f32(), out);
  x_saved = x;
  return y;
}

Tensor Linear::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(x_saved.ptr != nullptr, "Linear: backward called before forward");
  Shape want = x_saved.shape;
  want.back() = out;
  ST_CHECK(dy.shape == want && dy.contiguous(), "Linear: gradient {} does not match the output shape {}",
           shape_str(dy.shape), shape_str(want));
  Backend& be = params.backend();
  const int64_t N = x_saved.numel() / in;
  const float* g = dy.f32();
  be.gemm(DType::f32, true, false, out, in, N, 1.f, g, out, x_saved.f32(), in, 1.f, params.grad(weight).f32(), in);
  if (has_bias) be.bias_grad(g, params.grad(bias).f32(), N, out);
  Tensor dx = arena.tensor(x_saved.shape);
  be.gemm(DType::f32, false, false, N, in, out, 1.f, g, out, params.param(weight).f32(), in, 0.f, dx.f32(), in);
  return dx;
}

}  // namespace seqtrain
