// Forecast errors in the targets' own units, as forecasters judge a model: MAE, RMSE, MAPE,
// sMAPE and MASE (Hyndman & Koehler 2006: the MAE over the in-sample MAE of the naive forecast
// on the training split, lag 1, or lag m for a seasonal naive), per target and pooled over all.
// Percentages are in percent. MAPE skips actual values of 0 (undefined there); sMAPE counts a
// point whose actual and forecast are both 0 as 0. A metric with nothing to average is NaN.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace seqtrain {

struct ErrorSums {
  double abs = 0, sq = 0, ape = 0, sape = 0;
  int64_t n = 0, n_ape = 0;
  void add(double forecast, double actual);
  ErrorSums& operator+=(const ErrorSums& o);
};

struct ForecastMetrics {
  double mae = 0, rmse = 0, mape = 0, smape = 0, mase = 0;
};
// `scale`: the MASE denominator (naive_scale); <= 0 gives a NaN MASE.
ForecastMetrics metrics_of(const ErrorSums& s, double scale);

// The in-sample MAE of the lag-`lag` naive forecast over values[0, n): mean |v[t] - v[t-lag]|.
double naive_scale(const float* values, int64_t n, int64_t stride, int64_t lag);

// The sum behind naive_scale, read at growing n: sum over t in [lag, n) of |v[t] - v[t-lag]|,
// added in four interleaved lanes (t - lag's blocks of four), so the adds do not wait on one
// another (a fleet's scoring setup is this loop over every row of every series). A sum read on
// the way to a later n is the same bits as one read alone: a backtest's folds each read theirs
// in one pass.
class NaiveSum {
 public:
  NaiveSum(const float* values, int64_t stride, int64_t lag) : v_(values), stride_(stride), lag_(lag), at_(lag) {}
  // n must not decrease from one call to the next.
  double up_to(int64_t n);
  // The mean term over t in [lag, n) (the MASE scale); 0 when n <= lag (no term).
  double mean_up_to(int64_t n) { return n > lag_ ? up_to(n) / static_cast<double>(n - lag_) : 0.0; }

 private:
  double term(int64_t t) const;
  const float* v_;
  int64_t stride_, lag_;
  int64_t at_;  // the next block's first t
  double lane_[4] = {0, 0, 0, 0};
};

}  // namespace seqtrain
