// Forecast errors. See forecast_metrics.h.
#include "train/forecast_metrics.h"

#include <cmath>
#include <limits>

namespace seqtrain {

void ErrorSums::add(double forecast, double actual) {
  const double e = forecast - actual;
  abs += std::abs(e);
  sq += e * e;
  ++n;
  if (actual != 0) {
    ape += std::abs(e / actual);
    ++n_ape;
  }
  const double denom = std::abs(actual) + std::abs(forecast);
  if (denom > 0) sape += 2 * std::abs(e) / denom;
}

ErrorSums& ErrorSums::operator+=(const ErrorSums& o) {
  abs += o.abs;
  sq += o.sq;
  ape += o.ape;
  sape += o.sape;
  n += o.n;
  n_ape += o.n_ape;
  return *this;
}

ForecastMetrics metrics_of(const ErrorSums& s, double scale) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ForecastMetrics m;
  m.mae = s.n ? s.abs / s.n : nan;
  m.rmse = s.n ? std::sqrt(s.sq / s.n) : nan;
  m.mape = s.n_ape ? 100 * s.ape / s.n_ape : nan;
  m.smape = s.n ? 100 * s.sape / s.n : nan;
  m.mase = scale > 0 ? m.mae / scale : nan;
  return m;
}

double naive_scale(const float* values, int64_t n, int64_t stride, int64_t lag) {
  return NaiveSum(values, stride, lag).mean_up_to(n);
}

double NaiveSum::term(int64_t t) const { return std::abs(double(v_[t * stride_]) - v_[(t - lag_) * stride_]); }

double NaiveSum::up_to(int64_t n) {
  for (; at_ + 4 <= n; at_ += 4)
    for (int64_t k = 0; k < 4; ++k) lane_[k] += term(at_ + k);
  double tail[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
  for (int64_t t = at_; t < n; ++t) tail[t - at_] += term(t);
  return (tail[0] + tail[1]) + (tail[2] + tail[3]);
}

}  // namespace seqtrain
