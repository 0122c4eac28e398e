// Loss forward/backward. See loss.h. With d = pred - target, n = element count (the means; the
// sums of loss_sum/loss_sum_backward are the same without the division):
//   mse   = sum d^2 / n                         dL/dpred = 2 d / n
//   mae   = sum |d| / n                         dL/dpred = sign(d) / n
//   huber = sum h(d) / n, h = d^2/2 if |d| < delta else delta (|d| - delta/2)
//                                               dL/dpred = clamp(d, -delta, delta) / n
//   ce    = sum over kept rows (lse(z) - z[t]) / kept
//                                               dL/dz = (softmax(z) - onehot(t)) / kept, 0 for ignored rows
//           (the Backend's cross_entropy op computes the sums and the gradient)
//   quantile = sum over targets i and levels q of rho_tau(y_i - p_iq) / (m Q),
//              rho_tau(e) = max(tau e, (tau - 1) e)
//                                               dL/dp = (1 - tau if p > y, -tau if p < y, 1/2 - tau at
//                                               a tie: torch.maximum's split) / (m Q)
#include "nn/loss.h"

#include <algorithm>
#include <cmath>

#include "backend/backend.h"

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

// The op's arguments for a cross-entropy call, after checking shapes and dtypes (the op checks
// the target range).
CrossEntropyArgs ce_args(const Tensor& logits, const Tensor& target, const LossOptions& opt) {
  ST_CHECK(!logits.shape.empty() && logits.dim(-1) > 0 && logits.contiguous() && logits.dtype == DType::f32,
           "cross_entropy loss: logits must be a contiguous f32 [..., classes] tensor, got {} {}",
           dtype_name(logits.dtype), shape_str(logits.shape));
  const int64_t C = logits.dim(-1), rows = logits.numel() / C;
  ST_CHECK(target.dtype == DType::i64 && target.contiguous() && target.numel() == rows,
           "cross_entropy loss: logits {} need {} int64 class targets, got {} {}", shape_str(logits.shape), rows,
           dtype_name(target.dtype), shape_str(target.shape));
  CrossEntropyArgs a;
  a.rows = rows;
  a.classes = C;
  a.logits = logits.f32();
  a.targets = target.data<int64_t>();
  a.ignore_index = opt.ignore_index;
  a.targets_checked = opt.targets_checked;
  return a;
}

Backend& backend_of(const LossOptions& opt) { return opt.backend ? *opt.backend : default_backend(); }

// The quantile op's arguments, after checking that pred holds Q forecasts of each target.
QuantileArgs quantile_args(const Tensor& pred, const Tensor& target, const LossOptions& opt) {
  const int64_t Q = static_cast<int64_t>(opt.quantiles.size());
  ST_CHECK(Q > 0, "quantile loss: no quantile levels (train.quantiles)");
  ST_CHECK(pred.contiguous() && target.contiguous() && pred.dtype == DType::f32 && target.dtype == DType::f32 &&
               pred.numel() == target.numel() * Q,
           "quantile loss: a prediction of {} {} holds {} forecasts per target of {} {}; it must be f32 with {} "
           "levels per target", dtype_name(pred.dtype), shape_str(pred.shape), Q, dtype_name(target.dtype),
           shape_str(target.shape), Q);
  return QuantileArgs{pred.f32(), target.f32(), target.numel(), Q, opt.quantiles.data()};
}

// The backend op's kind for a regression loss, after checking its tensors and options.
RegressionLoss regression_kind(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt) {
  check_regression(kind, pred, target);
  switch (kind) {
    case LossKind::mse: return RegressionLoss::mse;
    case LossKind::mae: return RegressionLoss::mae;
    case LossKind::huber:
      ST_CHECK(opt.huber_delta > 0.f, "huber loss: delta must be > 0, got {}", opt.huber_delta);
      return RegressionLoss::huber;
    case LossKind::cross_entropy:
    case LossKind::quantile: break;
  }
  fail("internal error: {} is not a regression loss", loss_name(kind));
}

}  // namespace

LossKind parse_loss(const std::string& name) {
  if (name == "mse") return LossKind::mse;
  if (name == "mae" || name == "l1") return LossKind::mae;
  if (name == "huber") return LossKind::huber;
  if (name == "cross_entropy" || name == "ce") return LossKind::cross_entropy;
  if (name == "quantile") return LossKind::quantile;
  fail("unknown loss '{}': valid names are mse, mae (or l1), huber, cross_entropy (or ce), quantile", name);
}

std::string_view loss_name(LossKind k) {
  switch (k) {
    case LossKind::mse: return "mse";
    case LossKind::mae: return "mae";
    case LossKind::huber: return "huber";
    case LossKind::cross_entropy: return "cross_entropy";
    case LossKind::quantile: return "quantile";
  }
  return "?";
}

LossSum loss_sum(LossKind kind, const Tensor& pred, const Tensor& target, const LossOptions& opt) {
  if (kind == LossKind::cross_entropy) {
    const CrossEntropyArgs a = ce_args(pred, target, opt);
    if (a.rows == 0) return {};
    const CrossEntropySum s = backend_of(opt).cross_entropy_forward(a);
    return {s.loss, s.count, s.correct};
  }
  if (kind == LossKind::quantile) {
    const QuantileArgs a = quantile_args(pred, target, opt);
    return {a.targets ? backend_of(opt).quantile_loss_forward(a) : 0.0, pred.numel()};
  }
  const RegressionLoss r = regression_kind(kind, pred, target, opt);
  const int64_t n = pred.numel();
  if (n == 0) return {0.0, 0};
  return {backend_of(opt).regression_loss_forward(r, pred.f32(), target.f32(), n, opt.huber_delta), n};
}

void loss_sum_accumulate(LossKind kind, const Tensor& pred, const Tensor& target, double* acc,
                         const LossOptions& opt) {
  if (kind == LossKind::cross_entropy) {
    const CrossEntropyArgs a = ce_args(pred, target, opt);
    if (a.rows > 0) backend_of(opt).cross_entropy_accumulate(a, acc);
    return;
  }
  if (kind == LossKind::quantile) {
    const QuantileArgs a = quantile_args(pred, target, opt);
    if (a.targets > 0) acc[0] += backend_of(opt).quantile_loss_forward(a);
    return;
  }
  const RegressionLoss r = regression_kind(kind, pred, target, opt);
  if (pred.numel() > 0)
    backend_of(opt).regression_loss_accumulate(r, pred.f32(), target.f32(), pred.numel(), opt.huber_delta, acc);
}

int64_t count_targets(LossKind kind, const Tensor& pred, const Tensor& host_target, const LossOptions& opt) {
  if (kind != LossKind::cross_entropy) return pred.numel();
  const CrossEntropyArgs a = ce_args(pred, host_target, opt);
  if (a.rows == 0) return 0;
  check_cross_entropy_args(a);  // reads the targets only (the logits may be device memory)
  int64_t n = 0;
  for (int64_t i = 0; i < a.rows; ++i) n += a.targets[i] != a.ignore_index;
  return n;
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
    const CrossEntropyArgs a = ce_args(pred, target, opt);
    if (a.rows == 0) return;
    Backend& be = backend_of(opt);
    double k = scale;
    if (per_count) {
      // The kept rows' count from the op, not from the targets: they may be device memory.
      const int64_t kept = be.cross_entropy_forward(a).count;
      k = kept ? scale / static_cast<double>(kept) : 0.0;
    }
    be.cross_entropy_backward(a, k, g);
    return;
  }
  if (kind == LossKind::quantile) {
    const QuantileArgs a = quantile_args(pred, target, opt);
    if (a.targets == 0) return;
    backend_of(opt).quantile_loss_backward(a, static_cast<float>(per_count ? scale / pred.numel() : scale), g);
    return;
  }
  const RegressionLoss r = regression_kind(kind, pred, target, opt);
  const int64_t n = pred.numel();
  if (n == 0) return;
  const float k = static_cast<float>(per_count ? scale / n : scale);
  backend_of(opt).regression_loss_backward(r, pred.f32(), target.f32(), n, opt.huber_delta, k, g);
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
