// LayerNorm forward/backward. See layer_norm.h. With xhat = (x - mean) * rstd:
//   forward:  y = xhat * w + b
//   backward: dxhat = dy * w
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))   (per row)
//             dw += sum over rows of dy * xhat,  db += sum over rows of dy
// Row statistics accumulate in double: a row of large-mean activations would otherwise lose
// the variance to cancellation, and PyTorch parity is held to 1e-5.
#include "nn/layer_norm.h"

#include <cmath>

namespace seqtrain {
namespace {
// Rows below this run on one thread (an OpenMP team costs more than a few small rows).
constexpr int64_t kParallelRows = 64;
}  // namespace

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

Tensor LayerNorm::forward(const Tensor& x, Arena& arena) {
  ST_CHECK(!x.shape.empty() && x.dim(-1) == channels && x.contiguous(),
           "LayerNorm: input {} does not match normalized size {}: expected a contiguous [..., {}]",
           shape_str(x.shape), channels, channels);
  const int64_t C = channels, rows = x.numel() / C;
  Tensor y = arena.tensor(x.shape);
  mean = static_cast<float*>(arena.alloc(sizeof(float) * rows));
  rstd = static_cast<float*>(arena.alloc(sizeof(float) * rows));
  const float* xp = x.f32();
  const float* w = params.param(weight).f32();
  const float* b = has_bias ? params.param(bias).f32() : nullptr;
  float* yp = y.f32();
  float* mu_out = mean;
  float* rs_out = rstd;
#pragma omp parallel for schedule(static) if (rows >= kParallelRows)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * C;
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += xr[c];
    const double mu = s / C;
    double v = 0;
    for (int64_t c = 0; c < C; ++c) v += (xr[c] - mu) * (xr[c] - mu);
    const double rs = 1.0 / std::sqrt(v / C + kEps);
    mu_out[r] = static_cast<float>(mu);
    rs_out[r] = static_cast<float>(rs);
    float* yr = yp + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = static_cast<float>((xr[c] - mu) * rs);
      yr[c] = b ? xhat * w[c] + b[c] : xhat * w[c];
    }
  }
  x_saved = x;
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(x_saved.ptr != nullptr, "LayerNorm: backward called before forward");
  ST_CHECK(dy.shape == x_saved.shape && dy.contiguous(), "LayerNorm: gradient {} does not match the input {}",
           shape_str(dy.shape), shape_str(x_saved.shape));
  const int64_t C = channels, rows = x_saved.numel() / C;
  const float* xp = x_saved.f32();
  const float* g = dy.f32();
  const float* w = params.param(weight).f32();
  Tensor dx = arena.tensor(x_saved.shape);
  float* dxp = dx.f32();
  const float* mu = mean;
  const float* rs = rstd;
#pragma omp parallel for schedule(static) if (rows >= kParallelRows)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * C;
    const float* gr = g + r * C;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (xr[c] - mu[r]) * static_cast<double>(rs[r]), dxhat = static_cast<double>(gr[c]) * w[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    const double m1 = sum_dxhat / C, m2 = sum_dxhat_xhat / C;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (xr[c] - mu[r]) * static_cast<double>(rs[r]);
      dxp[r * C + c] = static_cast<float>(rs[r] * (static_cast<double>(gr[c]) * w[c] - m1 - xhat * m2));
    }
  }
  // Parameter gradients: column sums over rows, in a fixed order (no thread-count dependence).
  float* dw = params.grad(weight).f32();
  float* db = has_bias ? params.grad(bias).f32() : nullptr;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xp[r * C + c] - mu[r]) * rs[r];
      dw[c] += g[r * C + c] * xhat;
      if (db) db[c] += g[r * C + c];
    }
  return dx;
}

}  // namespace seqtrain
