// Rolling-origin backtests. See backtest.h.
#include "train/backtest.h"

#include <algorithm>
#include <cmath>

#include "backend/device_batch.h"
#include "config/scalar.h"
#include "core/error.h"
#include "core/parallel_each.h"
#include "core/seasonal.h"
#include "data/batch_layout.h"
#include "data/batch_source.h"
#include "data/csv.h"
#include "data/fleet.h"
#include "data/timestamps.h"
#include "train/objective.h"
#include "train/trainer.h"

namespace seqtrain {

std::vector<std::string> fold_ends(int64_t folds, int64_t step, const std::vector<std::string>& origins,
                                   int64_t horizon) {
  if (origins.empty()) {
    ST_CHECK(folds >= 1, "--folds {}: a backtest needs at least 1 fold", folds);
    ST_CHECK(step >= 1, "--step {}: folds must be at least 1 row apart", step);
    std::vector<std::string> out;
    for (int64_t k = 0; k < folds; ++k) out.push_back(std::to_string(-(horizon + (folds - 1 - k) * step)));
    return out;
  }
  // Each origin: a row number (>= 1) or a date; all of one form, increasing.
  std::optional<bool> rows;
  double previous = -1;
  for (const std::string& o : origins) {
    const auto n = parse_int64(o);
    const auto t = n ? std::nullopt : parse_timestamp(o);
    ST_CHECK((n && *n >= 1) || (t && t->kind != TimeKind::number),
             "--origins: '{}' is no origin; give each as a row number within the series (the first forecast row, at "
             "least data.lookback) or as a date / date-time like 2001-06-30", o);
    ST_CHECK(!rows || *rows == bool(n), "--origins: '{}' is written as a {} but the origins before it as {}s; give "
             "them all as row numbers or all as dates", o, n ? "row number" : "date", n ? "date" : "row number");
    rows = bool(n);
    const double v = n ? static_cast<double>(*n) : static_cast<double>(t->seconds);
    ST_CHECK(v > previous, "--origins: '{}' does not come after the origin before it; list the origins in increasing "
             "order, each once", o);
    previous = v;
  }
  return origins;
}

std::vector<int64_t> fold_origins(const Dataset& data, const Config& config, const std::string& end, int64_t fold,
                                  const std::string& flag) {
  const int64_t L = config.data.lookback, H = config.data.horizon;
  const Series& table = *data.table;
  std::vector<int64_t> out;
  for (const SeriesSegment& p : data.series) {
    const int64_t n = p.rows();
    const int64_t o = end_row(end, n, table.times.empty() ? nullptr : table.times.data() + p.begin);
    const std::string name = p.id.empty() ? "the series" : "series '" + p.id + "'";
    ST_CHECK(o >= L,
             "{}: fold {}'s origin is row {} of {}, before its first full lookback (data.lookback = {} rows, so the "
             "first origin is row {}): {}", flag, fold, o, name, L, L,
             flag == "--origins" ? "give a later origin" : "give fewer folds or a smaller --step");
    ST_CHECK(o + H <= n,
             "{}: fold {}'s origin is row {} of {}, which has {} rows: the forecast's data.horizon = {} steps after it "
             "run past the data (the last origin with actual values is row {}): {}", flag, fold, o, name, n, H,
             n - H, flag == "--origins" ? "give an earlier origin" : "give a smaller --step");
    out.push_back(p.begin + o);
  }
  return out;
}

Backtest::Backtest(const Config& config, const Dataset& data, std::vector<std::string> ends, const std::string& flag)
    : config_(config), data_(data), ends_(std::move(ends)) {
  for (int64_t k = 0; k < folds(); ++k) origins_.push_back(fold_origins(data, config, ends_[k], k, flag));
  // Every window is scored in units (each converted with its own series' statistics before it is
  // fed), so the scoring's units are the identity, and each (fold, series) is a "series" of it
  // with its own MASE scale: the naive's error over that series' rows before the fold's origin.
  units_ = ForecastScoring::shape_of(data, config.data.seasons, forecast_quantiles(config.train));
  const size_t T = units_.targets.size();
  units_.unit_shift.assign(T, 0.0);
  units_.unit_scale.assign(T, 1.0);
  units_.x_shift = units_.unit_shift;
  units_.x_scale = units_.unit_scale;
  units_.fleet.clear();
  // Each series' scales scan its rows up to the last origin: the setup's whole cost on a fleet,
  // and the series are independent, so they spread over the cores.
  std::vector<std::vector<std::vector<double>>> scales(data.series.size());  // [series][fold][target]
  parallel_each(data.series.size(), [&](size_t s) {
    std::vector<int64_t> ends;
    for (int64_t k = 0; k < folds(); ++k) ends.push_back(origins_[k][s]);
    scales[s] = naive_scales(data, static_cast<int64_t>(s), data.series[s].begin, ends, units_.mase_lag);
  });
  for (int64_t k = 0; k < folds(); ++k)
    for (size_t s = 0; s < data.series.size(); ++s)
      units_.fleet.push_back({data.series[s].id, units_.unit_shift, units_.unit_scale, scales[s][k]});
  units_.mase_scale = units_.fleet[0].mase_scale;
  scorer_ = std::make_unique<ForecastScorer>(units_, [](int64_t w) { return w; });
}

void Backtest::run(Model& model, const Dataset& scaled, int64_t first, int64_t last, int64_t batch_size) {
  ST_CHECK(first == next_fold_ && first <= last && last <= folds(), "Backtest::run: folds [{}, {}) after {}", first,
           last, next_fold_);
  ST_CHECK(scaled.series == data_.series, "Backtest::run: the scaled data holds other series than the backtest's");
  const int64_t N = static_cast<int64_t>(data_.series.size()), L = config_.data.lookback, H = config_.data.horizon;
  const int64_t T = scaled.n_targets(), Q = units_.levels(), F = scaled.n_features();
  std::vector<RowRange> ranges;
  for (int64_t k = first; k < last; ++k)
    for (int64_t o : origins_[k]) ranges.push_back({o - L, o + H});
  const WindowDataset windows = scaled.train.with_ranges(std::move(ranges), 1);
  const int64_t steps = windows.steps(), HT = H * T;
  // Each target's column in the statistics, and its feature in x (for the baselines).
  const std::vector<int64_t>& in_x = units_.target_in_x;
  std::vector<float> x, y, p;
  forward_batches(model, WindowSource(windows), window_layout(windows), batch_size,
                  [&](int64_t at, const Batch& host, const Batch&, const Tensor& pred, Arena&) {
    const int64_t n = host.count;
    p.resize(static_cast<size_t>(n * HT * Q));
    read_floats(model.params().backend(), pred, p.data());
    x.assign(host.x, host.x + n * steps * F);
    y.assign(host.y, host.y + n * HT);
    for (int64_t i = 0; i < n; ++i) {
      const Normalizer& norm = scaled.normalizer_of((at + i) % N);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t col = norm.index_of(scaled.targets[t]);
        norm.invert(col, y.data() + i * HT + t, H, T);
        for (int64_t q = 0; q < Q; ++q) norm.invert(col, p.data() + i * HT * Q + t * Q + q, H, T * Q);
        if (!in_x.empty()) norm.invert(col, x.data() + i * steps * F + in_x[t], steps, F);
      }
    }
    scorer_->add(n, x.data(), y.data(), p.data());
    actual_.insert(actual_.end(), y.begin(), y.end());
    levels_.insert(levels_.end(), p.begin(), p.end());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const float* xs = x.data() + i * steps * F;
          const int64_t f = in_x.empty() ? -1 : in_x[t];
          last_.push_back(f < 0 ? NAN : xs[(L - 1) * F + f]);
          seasonal_.push_back(f < 0 || units_.season == 0 ? NAN
                                                          : xs[seasonal_source_step(L, units_.season, h) * F + f]);
        }
  });
  next_fold_ = last;
}

namespace {

// A row of a series as the files name it: its time (data.time_column), else its row number
// within the series.
std::string row_label(const Series& table, const SeriesSegment& s, int64_t row) {
  return table.times.empty() ? std::to_string(row - s.begin) : format_timestamp(table.times[row], table.time_kind);
}

std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : ""; }

}  // namespace

Backtest::Forecast Backtest::forecast(int64_t fold, int64_t series, int64_t target) const {
  const int64_t N = static_cast<int64_t>(data_.series.size()), H = config_.data.horizon;
  const int64_t T = static_cast<int64_t>(units_.targets.size()), Q = units_.levels(), w = fold * N + series;
  Forecast f;
  f.origin = origins_[fold][series];
  for (int64_t h = 0; h < H; ++h) {
    f.actual.push_back(actual_[(w * H + h) * T + target]);
    const float* lv = levels_.data() + ((w * H + h) * T + target) * Q;
    f.point.push_back(lv[units_.point_level()]);
    f.levels.insert(f.levels.end(), lv, lv + Q);
  }
  return f;
}

nlohmann::json Backtest::report() const {
  nlohmann::json folds = nlohmann::json::array();
  const Series& table = *data_.table;
  for (int64_t k = 0; k < next_fold_; ++k) {
    nlohmann::json origins = nlohmann::json::object();
    for (size_t s = 0; s < data_.series.size(); ++s)
      origins[data_.series[s].id] = row_label(table, data_.series[s], origins_[k][s]);
    const int64_t N = static_cast<int64_t>(data_.series.size());
    folds.push_back({{"fold", k},
                     {"end", ends_[k]},
                     {"origins", origins},
                     {"windows", scorer_->windows(k * N, (k + 1) * N)},
                     {"metrics", scorer_->report(k * N, (k + 1) * N, data_.fleet)}});
  }
  return {{"lookback", config_.data.lookback}, {"horizon", config_.data.horizon}, {"targets", units_.targets},
          {"series", data_.series.size()}, {"folds", folds}, {"overall", scorer_->report()},
          {"windows", scorer_->windows()}};
}

std::string Backtest::metrics_csv(const nlohmann::json& report) const {
  std::string out = "fold,end,series,origin,forecaster,windows,mae,rmse,mape,smape,mase,pinball,coverage\n";
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) && j[k].is_number() ? number(j[k].get<double>()) : std::string();
  };
  auto rows = [&](const std::string& lead, const nlohmann::json& r, int64_t windows) {
    std::vector<std::pair<std::string, const nlohmann::json*>> who = {{"model", &r}};
    if (r.contains("baseline"))
      for (const auto& [name, b] : r["baseline"].items()) who.push_back({name, &b});
    for (const auto& [name, m] : who)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", lead, name, windows, num(*m, "mae"), num(*m, "rmse"),
                         num(*m, "mape"), num(*m, "smape"), num(*m, "mase"), num(*m, "pinball"), num(*m, "coverage"));
  };
  const Series& table = *data_.table;
  for (int64_t k = 0; k < next_fold_; ++k) {
    const nlohmann::json& fold = report["folds"][k];
    const nlohmann::json& r = fold["metrics"];
    rows(fmt::format("{},{},all,", k, csv_cell(ends_[k])), r, fold["windows"].get<int64_t>());
    if (!r.contains("per_series")) continue;
    for (size_t s = 0; s < data_.series.size(); ++s) {
      const std::string& id = data_.series[s].id;
      if (r["per_series"].contains(id))
        rows(fmt::format("{},{},{},{}", k, csv_cell(ends_[k]), csv_cell(id),
                         csv_cell(row_label(table, data_.series[s], origins_[k][s]))),
             r["per_series"][id], 1);
    }
  }
  rows(fmt::format("all,,all,"), report["overall"], report["windows"].get<int64_t>());
  return out;
}

std::string Backtest::predictions_csv() const {
  const int64_t N = static_cast<int64_t>(data_.series.size()), H = config_.data.horizon;
  const int64_t T = static_cast<int64_t>(units_.targets.size()), Q = units_.levels();
  const Series& table = *data_.table;
  const bool timed = !table.times.empty();
  std::string out = std::string("fold,series,origin,") + (timed ? "time," : "") + "step,target,actual,forecast";
  if (Q > 1)
    for (int64_t q = 0; q < Q; ++q) out += fmt::format(",forecast_q{}", units_.quantiles[q]);
  out += ",last_value,seasonal_naive,naive_mae\n";
  for (int64_t k = 0; k < next_fold_; ++k)
    for (int64_t s = 0; s < N; ++s) {
      const SeriesSegment& p = data_.series[s];
      const int64_t w = k * N + s, o = origins_[k][s];
      const std::string lead = fmt::format("{},{},{},", k, csv_cell(p.id), csv_cell(row_label(table, p, o)));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t at = (w * H + h) * T + t;
          const float* lv = levels_.data() + at * Q;
          out += lead;
          if (timed) out += format_timestamp(table.times[o + h], table.time_kind) + ",";
          out += fmt::format("{},{},{},{}", h + 1, csv_cell(units_.targets[t]), number(actual_[at]),
                             number(lv[units_.point_level()]));
          if (Q > 1)
            for (int64_t q = 0; q < Q; ++q) out += "," + number(lv[q]);
          out += fmt::format(",{},{},{}\n", number(last_[at]), number(seasonal_[at]),
                             number(units_.fleet[w].mase_scale[t]));
        }
    }
  return out;
}

}  // namespace seqtrain
