// Loss forward/backward. See loss.h. With d = pred - target, n = element count (the means; the
// sums of loss_sum/loss_sum_backward are the same without the division):
//   mse   = sum d^2 / n                         dL/dpred = 2 d / n
//   mae   = sum |d| / n                         dL/dpred = sign(d) / n
//   huber = sum h(d) / n, h = d^2/2 if |d| < delta else delta (|d| - delta/2)
//                                               dL/dpred = clamp(d, -delta, delta) / n
//   ce    = sum over kept rows (lse(z) - z[t]) / kept
//                                               dL/dz = (softmax(z) - onehot(t)) / kept, 0 for ignored rows
#include "nn/loss.h"

#include <algorithm>
#include <cmath>

namespace seqtrain {
namespace {

void check_regression(LossKind kind, const Tensor& pred, const Tensor& target) {
  ST_CHECK(pred.shape == target.shape, "{} loss: prediction {} and target {} must have the same shape",
           loss_name(kind), shape_str(pred.shape), shape_str(target.shape));
  ST_CHECK(pred.contiguous() && target.contiguous(), "{} loss: prediction and target must be contiguous",
           loss_name(kind));
  ST_CHECK(pred.dtype == DType::f32 && target.dtype == DType::f32,
           "{} loss: prediction and target must be f32, got {} and {}", loss_name(kind), dtype_name(pred.dtype),
           dtype_name(target.dtype));
}

// Rows and classes of a cross-entropy call, after checking shapes, dtypes and target range.
struct CeShape { int64_t rows, classes; };
CeShape check_ce(const Tensor& logits, const Tensor& target, const LossOptions& opt) {
  ST_CHECK(!logits.shape.empty() && logits.dim(-1) > 0 && logits.contiguous() && logits.dtype == DType::f32,
           "cross_entropy loss: logits must be a contiguous f32 [..., classes] tensor, got {} {}",
           dtype_name(logits.dtype), shape_str(logits.shape));
  const int64_t C = logits.dim(-1), rows = logits.numel() / C;
  ST_CHECK(target.dtype == DType::i64 && target.contiguous() && target.numel() == rows,
           "cross_entropy loss: logits {} need {} int64 class targets, got {} {}", shape_str(logits.shape), rows,
           dtype_name(target.dtype), shape_str(target.shape));
  const int64_t* t = target.data<int64_t>();
  for (int64_t i = 0; i < rows; ++i)
    ST_CHECK(t[i] == opt.ignore_index || (t[i] >= 0 && t[i] < C),
             "cross_entropy loss: target {} at row {} is out of range for {} classes (valid 0..{}, or ignore_index {})",
             t[i], i, C, C - 1, opt.ignore_index);
  return {rows, C};
}

// log(sum exp(z)) of one row, shifted by the max so exp never overflows.
double logsumexp(const float* z, int64_t C) {
  float m = z[0];
  for (int64_t j = 1; j < C; ++j) m = std::max(m, z[j]);
  double s = 0;
  for (int64_t j = 0; j < C; ++j) s += std::exp(static_cast<double>(z[j]) - m);
  return m + std::log(s);
}

}  // namespace

LossKind parse_loss(const std::string& name) {
  if (name == "mse") return LossKind::mse;
  if (name == "mae" || name == "l1") return LossKind::mae;
  if (name == "huber") return LossKind::huber;
  if (name == "cross_entropy" || name == "ce") return LossKind::cross_entropy;
  fail("unknown loss '{}': valid names are mse, mae (or l1), huber, cross_entropy (or ce)", name);
}

std::string_view loss_name(LossKind k) {
  switch (k) {
    case LossKind::mse: return "mse";
    case LossKind::mae: return "mae";
    case LossKind::huber: return "huber";
    case LossKind::cross_entropy: return "cross_entropy";
  }
  return "?";
}

LossSum loss_sum(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt) {
  if (kind == LossKind::cross_entropy) {
    const auto [rows, C] = check_ce(pred, target, opt);
    const float* z = pred.f32();
    const int64_t* t = target.data<int64_t>();
    LossSum s;
    for (int64_t i = 0; i < rows; ++i) {
      if (t[i] == opt.ignore_index) continue;
      s.sum += logsumexp(z + i * C, C) - z[i * C + t[i]];
      ++s.count;
    }
    return s;
  }
  check_regression(kind, pred, target);
  const int64_t n = pred.numel();
  const float* p = pred.f32();
  const float* y = target.f32();
  double sum = 0;
  switch (kind) {
    case LossKind::mse:
      for (int64_t i = 0; i < n; ++i) { const double d = double(p[i]) - y[i]; sum += d * d; }
      break;
    case LossKind::mae:
      for (int64_t i = 0; i < n; ++i) sum += std::abs(double(p[i]) - y[i]);
      break;
    case LossKind::huber: {
      ST_CHECK(opt.huber_delta > 0.f, "huber loss: delta must be > 0, got {}", opt.huber_delta);
      const double delta = opt.huber_delta;
      for (int64_t i = 0; i < n; ++i) {
        const double a = std::abs(double(p[i]) - y[i]);
        sum += a < delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
      }
      break;
    }
    case LossKind::cross_entropy: break;  // handled above
  }
  return {sum, n};
}

float loss_forward(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt) {
  // An empty or all-ignored batch gives 0 where torch gives NaN: it must not poison a running mean.
  const LossSum s = loss_sum(kind, pred, target, opt);
  return s.count ? static_cast<float>(s.sum / static_cast<double>(s.count)) : 0.f;
}

namespace {

// scale * d(sum)/d(pred), or with per_count scale / count * d(sum)/d(pred) = scale * d(mean)/d(pred).
void sum_gradient(LossKind kind, const Tensor& pred, const Tensor& target, Tensor dpred, double scale, bool per_count,
                  const LossOptions& opt) {
  ST_CHECK(dpred.shape == pred.shape && dpred.contiguous() && dpred.dtype == DType::f32,
           "{} loss: gradient buffer {} {} must be a contiguous f32 tensor shaped like the prediction {}",
           loss_name(kind), dtype_name(dpred.dtype), shape_str(dpred.shape), shape_str(pred.shape));
  float* g = dpred.f32();
  if (kind == LossKind::cross_entropy) {
    const auto [rows, C] = check_ce(pred, target, opt);
    const float* z = pred.f32();
    const int64_t* t = target.data<int64_t>();
    double k = scale;
    if (per_count) {
      int64_t kept = 0;
      for (int64_t i = 0; i < rows; ++i) kept += t[i] != opt.ignore_index;
      k = kept ? scale / kept : 0.0;
    }
    for (int64_t i = 0; i < rows; ++i) {
      float* gi = g + i * C;
      if (t[i] == opt.ignore_index) { std::fill(gi, gi + C, 0.f); continue; }
      const float* zi = z + i * C;
      const double lse = logsumexp(zi, C);
      for (int64_t j = 0; j < C; ++j) gi[j] = static_cast<float>(k * std::exp(double(zi[j]) - lse));
      gi[t[i]] -= static_cast<float>(k);
    }
    return;
  }
  check_regression(kind, pred, target);
  const int64_t n = pred.numel();
  if (n == 0) return;
  const float* p = pred.f32();
  const float* y = target.f32();
  const float k = static_cast<float>(per_count ? scale / n : scale);
  switch (kind) {
    case LossKind::mse:
      for (int64_t i = 0; i < n; ++i) g[i] = 2.f * k * (p[i] - y[i]);
      break;
    case LossKind::mae:
      for (int64_t i = 0; i < n; ++i) {
        const float d = p[i] - y[i];
        g[i] = d > 0.f ? k : (d < 0.f ? -k : 0.f);
      }
      break;
    case LossKind::huber: {
      ST_CHECK(opt.huber_delta > 0.f, "huber loss: delta must be > 0, got {}", opt.huber_delta);
      const float delta = opt.huber_delta;
      for (int64_t i = 0; i < n; ++i) g[i] = k * std::clamp(p[i] - y[i], -delta, delta);
      break;
    }
    case LossKind::cross_entropy: break;  // handled above
  }
}

}  // namespace

void loss_sum_backward(LossKind kind, const Tensor& pred, const Tensor& target, Tensor dpred, double scale,
                       const LossOptions& opt) {
  sum_gradient(kind, pred, target, dpred, scale, /*per_count=*/false, opt);
}

void loss_backward(LossKind kind, const Tensor& pred, const Tensor& target, Tensor dpred, float scale,
                   const LossOptions& opt) {
  sum_gradient(kind, pred, target, dpred, scale, /*per_count=*/true, opt);
}

}  // namespace seqtrain
