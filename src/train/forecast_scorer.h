// ForecastScorer: how good a split's forecasts are in the targets' own units, beside the two
// forecasts any forecaster must beat on the same windows: the last observed value repeated
// (last value) and the last observed season repeated (seasonal naive, period data.seasons'
// longest). Every val and test record of a forecasting run and `seqtrain eval` report it.
// ForecastScoring is fixed for a run (the MASE scales need the training rows, computed once);
// a scorer is fed one evaluation's batches and read once. A fleet's windows are scored each in
// its own series' units (data.normalize_scope series) and MASE scale; the report pools every
// series and, asked for, gives each series' own.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/seasonal.h"
#include "data/split.h"
#include "train/forecast_metrics.h"

namespace seqtrain {

struct BatchSource;
struct Dataset;
struct Normalizer;

// The level a quantile forecast's point forecast is: 0.5, else the middle one (0 without levels).
int64_t point_level(const std::vector<double>& quantiles);

struct ForecastScoring {
  std::vector<std::string> targets;
  // Per target: units = z * unit_scale + unit_shift (the normalizer's inverse; identity for npy,
  // whose y is in its own units).
  std::vector<double> unit_shift, unit_scale;
  // Each target's feature index in x (whose values are z-scored like the target), or empty when
  // some target is no input: then there are no baselines.
  std::vector<int64_t> target_in_x;
  std::vector<double> x_shift, x_scale;  // per target: how its x feature maps back to units
  int64_t lookback = 0, horizon = 0, features = 0;
  int64_t x_steps = 0;              // rows of x per window: the lookback, then any known future
  int64_t season = 0;               // the seasonal naive's period (<= lookback); 0 = none
  int64_t mase_lag = 1;             // MASE's naive lag: the longest season, else 1
  std::vector<double> mase_scale;   // per target; empty = no MASE (npy)
  // A fleet: per series its id, units (shift and scale of the targets, and of their x features,
  // the same columns) and MASE scales; the fields above are then series 0's. Empty: one series.
  struct SeriesUnits {
    std::string id;
    std::vector<double> shift, scale, mase_scale;
  };
  std::vector<SeriesUnits> fleet;
  int64_t series_count() const { return fleet.empty() ? 1 : static_cast<int64_t>(fleet.size()); }
  // train.loss quantile: the levels of each forecast (innermost in the outputs); empty = point
  // forecasts. The point forecast scored by the errors is then the median level (0.5, else the
  // middle one); pinball loss and the coverage of the outermost interval are added.
  std::vector<double> quantiles;
  int64_t levels() const { return quantiles.empty() ? 1 : static_cast<int64_t>(quantiles.size()); }
  int64_t point_level() const;

  bool baselines() const { return !target_in_x.empty(); }
  // A csv/synthetic run: scales from the training rows of `data`; `seasons` is data.seasons.
  static ForecastScoring of(const Dataset& data, const std::vector<int64_t>& seasons,
                            const std::vector<double>& quantiles = {});
  // Its windows' shape, targets, seasons and levels alone: no units, no MASE scales (a backtest
  // sets its own).
  static ForecastScoring shape_of(const Dataset& data, const std::vector<int64_t>& seasons,
                                  const std::vector<double>& quantiles = {});
  // An npy regression run: y [horizon, targets] in its own units. With target_in_x
  // (data.npy.target_features) and x's statistics, the last-value baseline; with the training
  // split too, MASE (the lag-1 naive's MAE over the training samples' target features).
  static ForecastScoring of_npy(int64_t lookback, int64_t features, int64_t horizon, int64_t targets,
                                const std::vector<double>& quantiles = {}, const std::vector<int64_t>& target_in_x = {},
                                const Normalizer* x_stats = nullptr, const BatchSource* train = nullptr);
};

// Which series (an index into ForecastScoring::fleet) window k of the evaluated split is; empty:
// every window is series 0.
using SeriesOf = std::function<int64_t(int64_t window)>;

// MASE's denominators of series k of `data` (an index into Dataset::series) over the table rows
// `rows`: per target, the in-sample MAE of the lag-`lag` naive forecast in the target's units.
std::vector<double> naive_scales(const Dataset& data, int64_t k, RowRange rows, int64_t lag);
// The same over rows [begin, end) for each of `ends` at once ([end][target]), in one pass over the
// rows (NaiveSum, read at each end, so each equals naive_scale's exactly): a backtest's folds each
// scale by the rows before their origin.
std::vector<std::vector<double>> naive_scales(const Dataset& data, int64_t k, int64_t begin,
                                              const std::vector<int64_t>& ends, int64_t lag);

class ForecastScorer {
 public:
  explicit ForecastScorer(const ForecastScoring& s, SeriesOf series_of = {});
  // n windows: x [n, lookback, features], y [n, horizon * targets] (step-major) and p [n, horizon *
  // targets * levels], all as the model sees them (normalized); y and p are mapped to units here.
  // Windows come in the split's order from window 0, as every evaluation feeds them (series_of
  // is asked for the running index).
  void add(int64_t n, const float* x, const float* y, const float* p);
  // {"mae", "rmse", "mape", "smape", "mase", "per_target": {name: {...}} (more than one target),
  //  "baseline": {"last_value": {...}, "seasonal_naive": {...}}} (those the data allows); with
  //  quantiles also "pinball" (the mean pinball loss in units over every level) and "coverage"
  //  (the share of actual values inside the outermost levels' interval, "interval"). Over a fleet
  //  the errors pool every series' windows and MASE is the series' mean (each by its own naive);
  //  with per_series, "per_series": {id: the same of that series alone} (series with windows).
  nlohmann::json report(bool per_series = false) const;
  // The same over the windows of series [s0, s1) alone (a backtest's fold: its series).
  nlohmann::json report(int64_t s0, int64_t s1, bool per_series = false) const;
  int64_t windows() const { return seen_; }
  int64_t windows(int64_t s0, int64_t s1) const;  // of series [s0, s1)

 private:
  // Series [s0, s1) pooled: per target, then over targets.
  ForecastMetrics pooled(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1) const;
  ForecastMetrics target_metrics(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1, int64_t t) const;
  nlohmann::json metrics_json(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1, bool per_target) const;
  nlohmann::json report_of(int64_t s0, int64_t s1) const;
  const double* mase_of(int64_t series) const;  // per target; nullptr without MASE
  const ForecastScoring& s_;
  SeriesOf series_of_;
  int64_t seen_ = 0;
  // Per series and target (series-major).
  std::vector<ErrorSums> model_, last_, seasonal_;
  // Per series.
  std::vector<double> pinball_;
  std::vector<int64_t> pinball_n_, covered_, interval_n_;
};

// The metrics train.monitor may name for a forecasting run, from a report: "mae" ->
// report["mae"]; NaN when absent.
double report_metric(const nlohmann::json& report, const std::string& name);

}  // namespace seqtrain
