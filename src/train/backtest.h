// Backtest: rolling-origin evaluation (`seqtrain backtest`). A forecaster is judged as it will be
// used: at several origins of the same data, each forecasting the horizon after the origin from
// the rows before it, beside the last-value and seasonal-naive forecasts of the same origins. A
// fold is one origin in every series of a fleet; its end is spelled as data.end spells it (-N:
// N rows before each series' end; N: row N; a date), so a refit trains on exactly the rows
// before its origin by setting data.end to it.
//
// Everything is scored in the targets' units, each window with its own series' statistics, so
// folds scored by different models (a refit's, each with its own normalizer) pool into one
// overall report. Without refit every fold runs in one evaluation pass over all origins.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "models/model.h"
#include "train/forecast_scorer.h"

namespace seqtrain {

// The folds' ends: `folds` origins `step` rows apart, the last `horizon` rows before each series'
// end ("-16", "-24", ...: oldest first), or `origins` as given (row numbers within each series,
// or dates / date-times), which must increase. Errors name --folds, --step or --origins.
std::vector<std::string> fold_ends(int64_t folds, int64_t step, const std::vector<std::string>& origins,
                                   int64_t horizon);

// Fold `fold`'s origin (its first forecast row, a table row) in every series of `data`: at least
// data.lookback rows of the series before it, data.horizon rows after it. An origin outside
// that is an Error naming the fold, the series, its rows and what to change (`flag`).
std::vector<int64_t> fold_origins(const Dataset& data, const Config& config, const std::string& end, int64_t fold,
                                  const std::string& flag);

class Backtest {
 public:
  // `data`: the input scaled by any statistics (only its series, rows and units are read); `ends`
  // from fold_ends. Computes and checks every fold's origins.
  Backtest(const Config& config, const Dataset& data, std::vector<std::string> ends, const std::string& flag);

  int64_t folds() const { return static_cast<int64_t>(ends_.size()); }
  const std::string& end(int64_t fold) const { return ends_[fold]; }
  const std::vector<int64_t>& origins(int64_t fold) const { return origins_[fold]; }

  // Runs `model` at the origins of folds [first, last) of `scaled` (the input scaled with the
  // model's own statistics; its series must be the constructor's) in one pass, batch_size windows
  // at a time, and scores and keeps their forecasts. Folds must run in order.
  void run(Model& model, const Dataset& scaled, int64_t first, int64_t last, int64_t batch_size);

  // backtest.json: each fold's end, origins and report (per series for a fleet), the overall.
  nlohmann::json report() const;
  // backtest.csv: one row per fold (then "all") x series ("all", then each of a fleet) x
  // forecaster (model, last_value, seasonal_naive): its errors in units, read from report()'s
  // (a fleet's per-series reports are most of a backtest's scoring; built once for both files).
  std::string metrics_csv(const nlohmann::json& report) const;
  // predictions.csv: one row per fold x series x step x target: origin, actual, forecast (and each
  // quantile level), the baselines' forecasts and MASE's naive scale, in the targets' units.
  std::string predictions_csv() const;

  // What a plot draws of fold k, series s, target t: the forecast's first row (table row) and
  // per step the actual, the point forecast and the levels ([H][Q]).
  struct Forecast {
    int64_t origin = 0;
    std::vector<float> actual, point, levels;
  };
  Forecast forecast(int64_t fold, int64_t series, int64_t target) const;
  const Dataset& data() const { return data_; }
  const ForecastScoring& scoring() const { return units_; }

 private:
  const Config& config_;
  const Dataset& data_;
  std::vector<std::string> ends_;
  std::vector<std::vector<int64_t>> origins_;  // [fold][series]
  ForecastScoring units_;  // identity units; each (fold, series) a "series" with its MASE scales
  // Fed every window once, fold-major; a fold's report is that of its (fold, series) range.
  std::unique_ptr<ForecastScorer> scorer_;
  int64_t next_fold_ = 0;
  // Per window (fold-major, then series), in units: actual and baselines [H * T], levels [H * T * Q].
  std::vector<float> actual_, levels_, last_, seasonal_;
};

}  // namespace seqtrain
