// Conv1d forward/backward over the Backend's im2col columns and GEMMs. See conv1d.h.
//   forward:  cols[B*T, in*k] = im2col(x);  y[B*T, out] = cols W[out, in*k]^T + b
//   backward: dW[out, in*k] += dy^T cols;   db[out] += column sums of dy
//             dx = col2im(dcols),           dcols[B*T, in*k] = dy W
#include "nn/conv1d.h"

#include <cmath>

#include "core/trace.h"

namespace seqtrain {

Conv1d::Conv1d(ParamStore& p, const std::string& prefix, int64_t in_, int64_t out_, int64_t kernel_)
    : params(p), in(in_), out(out_), kernel(kernel_) {
  ST_CHECK(in > 0 && out > 0 && kernel > 0, "Conv1d '{}': in_channels={}, out_channels={} and kernel_size={} must all "
           "be positive", prefix, in, out, kernel);
  p.backend().require(BackendOp::conv1d, "(Conv1d '" + prefix + "')");
  weight = params.add(prefix + ".weight", {out, in, kernel});
  bias = params.add(prefix + ".bias", {out});
}

void Conv1d::init(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in * kernel));
  float* w = params.param(weight).f32();
  for (int64_t i = 0; i < out * in * kernel; ++i) w[i] = rng.uniform(-bound, bound);
  float* b = params.param(bias).f32();
  for (int64_t i = 0; i < out; ++i) b[i] = rng.uniform(-bound, bound);
}

Tensor Conv1d::forward(const Tensor& x, const uint8_t* mask, Arena& arena) {
  ST_TRACE("conv1d.forward", "layer", [&] { return trace::shape_args(x.shape); });
  ST_CHECK(x.shape.size() == 3 && x.dim(2) == in && x.contiguous(),
           "Conv1d: input {} does not match weight [{}, {}, {}]: expected a contiguous [batch, steps, {}]",
           shape_str(x.shape), out, in, kernel, in);
  const int64_t B = x.dim(0), T = x.dim(1), K = in * kernel;
  args_ = Conv1dArgs{.batch = B, .steps = T, .channels = in, .kernel = kernel, .pad_left = (kernel - 1) / 2,
                     .mask = mask};
  Backend& be = params.backend();
  cols_ = arena.tensor({B * T, K});
  be.im2col_1d(args_, x.f32(), cols_.f32());
  Tensor y = arena.tensor({B, T, out});
  be.gemm_bias(DType::f32, false, true, B * T, out, K, cols_.f32(), K, params.param(weight).f32(), K,
               params.param(bias).f32(), y.f32(), out);
  return y;
}

Tensor Conv1d::backward(const Tensor& dy, Arena& arena, bool want_dx) {
  ST_TRACE("conv1d.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(cols_.ptr != nullptr, "Conv1d: backward called before forward");
  const int64_t B = args_.batch, T = args_.steps, K = in * kernel;
  ST_CHECK(dy.shape == (Shape{B, T, out}) && dy.contiguous(), "Conv1d: gradient {} does not match the output [{}, {}, {}]",
           shape_str(dy.shape), B, T, out);
  Backend& be = params.backend();
  const std::vector<ParamEntry>& e = params.entries();
  if (!e[weight].frozen)
    be.gemm(DType::f32, true, false, out, K, B * T, 1.f, dy.f32(), out, cols_.f32(), K, 1.f, params.grad(weight).f32(),
            K);
  if (!e[bias].frozen) be.bias_grad(dy.f32(), params.grad(bias).f32(), B * T, out);
  if (!want_dx) return {};
  Tensor dcols = arena.tensor({B * T, K});
  be.gemm(DType::f32, false, false, B * T, K, out, 1.f, dy.f32(), out, params.param(weight).f32(), K, 0.f,
          dcols.f32(), K);
  Tensor dx = arena.tensor({B, T, in});
  be.col2im_1d(args_, dcols.f32(), dx.f32());
  return dx;
}

}  // namespace seqtrain
