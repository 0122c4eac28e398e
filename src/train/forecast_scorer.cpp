// Forecast scoring. See forecast_scorer.h.
#include "train/forecast_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/parallel_each.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/normalizer.h"

namespace seqtrain {

int64_t point_level(const std::vector<double>& quantiles) {
  for (size_t q = 0; q < quantiles.size(); ++q)
    if (quantiles[q] == 0.5) return static_cast<int64_t>(q);
  return static_cast<int64_t>(quantiles.size()) / 2;
}

int64_t ForecastScoring::point_level() const { return seqtrain::point_level(quantiles); }

ForecastScoring ForecastScoring::shape_of(const Dataset& d, const std::vector<int64_t>& seasons,
                                          const std::vector<double>& quantiles) {
  ForecastScoring s;
  s.quantiles = quantiles;
  s.targets = d.targets;
  s.lookback = d.train.lookback();
  s.x_steps = d.train.steps();
  s.horizon = d.train.horizon();
  s.features = d.n_features();
  const int64_t longest = seasons.empty() ? 0 : *std::max_element(seasons.begin(), seasons.end());
  s.mase_lag = std::max<int64_t>(1, longest);
  s.season = longest <= s.lookback ? longest : 0;
  s.target_in_x = d.target_feature_indices();
  return s;
}

ForecastScoring ForecastScoring::of(const Dataset& d, const std::vector<int64_t>& seasons,
                                    const std::vector<double>& quantiles) {
  ForecastScoring s = shape_of(d, seasons, quantiles);
  // The MASE denominators: the lag-m naive's in-sample MAE over the training rows, in units. A
  // scan of every training row of every series, so on a fleet it spreads over the cores.
  std::vector<std::vector<double>> mase(d.series.size());
  parallel_each(d.series.size(), [&](size_t k) {
    mase[k] = naive_scales(d, static_cast<int64_t>(k), d.series_splits[k][0], s.mase_lag);
  });
  for (size_t k = 0; k < d.series.size(); ++k) {
    const Normalizer& norm = d.normalizer_of(static_cast<int64_t>(k));
    ForecastScoring::SeriesUnits u{d.series[k].id, {}, {}, std::move(mase[k])};
    for (const std::string& t : d.targets) {
      const int64_t col = norm.index_of(t);
      u.shift.push_back(norm.shift[col]);
      u.scale.push_back(norm.scale[col]);
    }
    if (k == 0) {
      s.unit_shift = u.shift;
      s.unit_scale = u.scale;
      s.mase_scale = u.mase_scale;
    }
    if (d.fleet) s.fleet.push_back(std::move(u));
  }
  // A target among the features is the same column of the table, so it maps back the same way.
  s.x_shift = s.unit_shift;
  s.x_scale = s.unit_scale;
  return s;
}

std::vector<double> naive_scales(const Dataset& d, int64_t k, RowRange rows, int64_t lag) {
  return naive_scales(d, k, rows.begin, {rows.end}, lag)[0];
}

std::vector<std::vector<double>> naive_scales(const Dataset& d, int64_t k, int64_t begin,
                                              const std::vector<int64_t>& ends, int64_t lag) {
  const Normalizer& norm = d.normalizer_of(k);
  const Series& table = *d.table;
  const int64_t last = ends.empty() ? begin : *std::max_element(ends.begin(), ends.end());
  std::vector<size_t> order(ends.size());  // the ends, read in increasing order
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ends[a] < ends[b]; });
  std::vector<std::vector<double>> out(ends.size());
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(0, last - begin)));
  for (const std::string& t : d.targets) {
    const int64_t col = norm.index_of(t), tc = table.column_index(t);
    for (int64_t r = begin; r < last; ++r) v[r - begin] = norm.invert(col, table.at(r, tc));
    NaiveSum sum(v.data(), 1, lag);
    for (size_t e : order) {
      out[e].push_back(sum.mean_up_to(ends[e] - begin));
    }
  }
  return out;
}

ForecastScoring ForecastScoring::of_npy(int64_t lookback, int64_t features, int64_t horizon, int64_t targets,
                                        const std::vector<double>& quantiles, const std::vector<int64_t>& target_in_x,
                                        const Normalizer* x_stats, const BatchSource* train) {
  ForecastScoring s;
  s.quantiles = quantiles;
  if (!target_in_x.empty() && x_stats) {
    s.target_in_x = target_in_x;
    for (int64_t f : target_in_x) {
      s.x_shift.push_back(x_stats->shift.at(f));
      s.x_scale.push_back(x_stats->scale.at(f));
    }
    if (train && train->size() > 0) {
      // sum |x[t] - x[t-1]| of each target feature over every training sample, in units (the
      // shift cancels in a difference), read a chunk of samples at a time.
      const int64_t chunk = 256, T = lookback, F = features;
      std::vector<double> sum(target_in_x.size(), 0.0);
      std::vector<float> x(static_cast<size_t>(chunk * train->x_size()));
      std::vector<int64_t> idx(chunk);
      for (int64_t b = 0; b < train->size(); b += chunk) {
        const int64_t n = std::min(chunk, train->size() - b);
        for (int64_t i = 0; i < n; ++i) idx[i] = b + i;
        train->fill(std::span<const int64_t>(idx.data(), n), 0, x.data(), nullptr);
        for (int64_t i = 0; i < n; ++i)
          for (size_t k = 0; k < target_in_x.size(); ++k)
            for (int64_t t = 1; t < T; ++t)
              sum[k] += std::abs(double(x[(i * T + t) * F + target_in_x[k]]) - x[(i * T + t - 1) * F + target_in_x[k]]);
      }
      for (size_t k = 0; k < target_in_x.size(); ++k)
        s.mase_scale.push_back(T > 1 ? sum[k] * s.x_scale[k] / static_cast<double>(train->size() * (T - 1)) : 0.0);
    }
  }
  for (int64_t t = 0; t < targets; ++t) s.targets.push_back(targets == 1 ? "y" : "y" + std::to_string(t));
  s.unit_shift.assign(targets, 0.0);
  s.unit_scale.assign(targets, 1.0);
  s.lookback = lookback;
  s.x_steps = lookback;
  s.features = features;
  s.horizon = horizon;
  return s;
}

ForecastScorer::ForecastScorer(const ForecastScoring& s, SeriesOf series_of)
    : s_(s),
      series_of_(std::move(series_of)),
      model_(s.series_count() * s.targets.size()),
      last_(model_.size()),
      seasonal_(model_.size()),
      pinball_(s.series_count(), 0.0),
      pinball_n_(s.series_count(), 0),
      covered_(s.series_count(), 0),
      interval_n_(s.series_count(), 0) {}

const double* ForecastScorer::mase_of(int64_t series) const {
  const std::vector<double>& m = s_.fleet.empty() ? s_.mase_scale : s_.fleet[series].mase_scale;
  return m.empty() ? nullptr : m.data();
}

void ForecastScorer::add(int64_t n, const float* x, const float* y, const float* p) {
  const int64_t T = static_cast<int64_t>(s_.targets.size()), H = s_.horizon, L = s_.lookback, F = s_.features;
  const int64_t Q = s_.levels(), point = s_.point_level();
  // Units computed in float like Normalizer::invert, so a forecast equal to a baseline in the
  // model's units is equal in the data's units too (residual_to's bit-for-bit promise). A value
  // within float rounding of 0 is 0: the data's zeros come back from z-scoring as +-1e-7-ish,
  // and MAPE must skip them, not divide by them.
  auto units = [](float z, double scale, double shift) {
    const double v = z * scale + shift;
    const double eps = 8 * std::numeric_limits<float>::epsilon() * (std::abs(z * scale) + std::abs(shift));
    return std::abs(v) <= eps ? 0.f : static_cast<float>(v);
  };
  for (int64_t i = 0; i < n; ++i, ++seen_) {
    const int64_t series = series_of_ ? series_of_(seen_) : 0;
    ST_CHECK(0 <= series && series < s_.series_count(), "ForecastScorer: window {} is of series {}, but the scoring "
             "has {}", seen_, series, s_.series_count());
    const bool own = !s_.fleet.empty();
    const double* shift = own ? s_.fleet[series].shift.data() : s_.unit_shift.data();
    const double* scale = own ? s_.fleet[series].scale.data() : s_.unit_scale.data();
    const double* x_shift = own ? shift : s_.x_shift.data();
    const double* x_scale = own ? scale : s_.x_scale.data();
    ErrorSums* model = &model_[series * T];
    ErrorSums* last = &last_[series * T];
    ErrorSums* seasonal = &seasonal_[series * T];
    for (int64_t t = 0; t < T; ++t) {
      const float* xs = x ? x + i * s_.x_steps * F : nullptr;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t k = i * H * T + h * T + t;
        const float actual = units(y[k], scale[t], shift[t]);
        const float* levels = p + k * Q;
        model[t].add(units(levels[point], scale[t], shift[t]), actual);
        if (Q > 1) {
          for (int64_t q = 0; q < Q; ++q) {
            const double e = actual - units(levels[q], scale[t], shift[t]), tau = s_.quantiles[q];
            pinball_[series] += std::max(tau * e, (tau - 1) * e);
          }
          pinball_n_[series] += Q;
          const float lo = units(levels[0], scale[t], shift[t]);
          const float hi = units(levels[Q - 1], scale[t], shift[t]);
          covered_[series] += lo <= actual && actual <= hi;
          ++interval_n_[series];
        }
        if (!s_.baselines() || !xs) continue;
        const int64_t f = s_.target_in_x[t];
        last[t].add(units(xs[(L - 1) * F + f], x_scale[t], x_shift[t]), actual);
        if (s_.season > 0)
          seasonal[t].add(units(xs[seasonal_source_step(L, s_.season, h) * F + f], x_scale[t], x_shift[t]), actual);
      }
    }
  }
}

// Target t over series [s0, s1): the errors pooled, MASE the mean of each series' own (series
// without windows left out), since each series' naive has its own scale.
ForecastMetrics ForecastScorer::target_metrics(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1,
                                               int64_t t) const {
  const int64_t T = static_cast<int64_t>(s_.targets.size());
  ErrorSums all;
  double mase = 0;
  int64_t with = 0;
  for (int64_t s = s0; s < s1; ++s) {
    const ErrorSums& one = e[s * T + t];
    all += one;
    if (one.n == 0) continue;
    const double* m = mase_of(s);
    mase += metrics_of(one, m ? m[t] : 0.0).mase;
    ++with;
  }
  ForecastMetrics out = metrics_of(all, 0);
  out.mase = with ? mase / static_cast<double>(with) : std::numeric_limits<double>::quiet_NaN();
  return out;
}

// Every target's errors pooled; MASE as the targets' mean, since their MAEs are in different units.
ForecastMetrics ForecastScorer::pooled(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1) const {
  const int64_t T = static_cast<int64_t>(s_.targets.size());
  ErrorSums all;
  double mase = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = s0; s < s1; ++s) all += e[s * T + t];
    mase += target_metrics(e, s0, s1, t).mase / static_cast<double>(T);
  }
  ForecastMetrics m = metrics_of(all, 0);
  m.mase = mase;
  return m;
}

namespace {
// Keyed one by one rather than from an initializer list, which copies each pair: a fleet's
// backtest builds tens of thousands of these.
nlohmann::json to_json(const ForecastMetrics& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, v] : {std::pair{"mae", m.mae}, {"rmse", m.rmse}, {"mape", m.mape}, {"smape", m.smape},
                               {"mase", m.mase}})
    j.emplace(key, std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  return j;
}
}  // namespace

nlohmann::json ForecastScorer::metrics_json(const std::vector<ErrorSums>& e, int64_t s0, int64_t s1,
                                            bool per_target) const {
  nlohmann::json j = to_json(pooled(e, s0, s1));
  if (per_target && s_.targets.size() > 1) {
    nlohmann::json each = nlohmann::json::object();
    for (size_t t = 0; t < s_.targets.size(); ++t)
      each[s_.targets[t]] = to_json(target_metrics(e, s0, s1, static_cast<int64_t>(t)));
    j["per_target"] = std::move(each);
  }
  return j;
}

nlohmann::json ForecastScorer::report_of(int64_t s0, int64_t s1) const {
  nlohmann::json j = metrics_json(model_, s0, s1, true);
  double pinball = 0;
  int64_t pinball_n = 0, covered = 0, interval_n = 0;
  for (int64_t s = s0; s < s1; ++s) {
    pinball += pinball_[s];
    pinball_n += pinball_n_[s];
    covered += covered_[s];
    interval_n += interval_n_[s];
  }
  if (s_.levels() > 1 && pinball_n > 0) {
    j["pinball"] = pinball / static_cast<double>(pinball_n);
    j["coverage"] = static_cast<double>(covered) / static_cast<double>(interval_n);
    j["interval"] = {s_.quantiles.front(), s_.quantiles.back()};
  }
  if (s_.baselines()) {
    j["baseline"]["last_value"] = metrics_json(last_, s0, s1, true);
    if (s_.season > 0) j["baseline"]["seasonal_naive"] = metrics_json(seasonal_, s0, s1, true);
  }
  return j;
}

nlohmann::json ForecastScorer::report(bool per_series) const { return report(0, s_.series_count(), per_series); }

int64_t ForecastScorer::windows(int64_t s0, int64_t s1) const {
  const int64_t T = static_cast<int64_t>(s_.targets.size()), H = std::max<int64_t>(1, s_.horizon);
  int64_t n = 0;
  for (int64_t s = s0; s < s1; ++s) n += T ? model_[s * T].n / H : 0;
  return n;
}

nlohmann::json ForecastScorer::report(int64_t s0, int64_t s1, bool per_series) const {
  nlohmann::json j = report_of(s0, s1);
  if (!per_series || s_.fleet.empty()) return j;
  // A fleet's thousands of small reports, each independent of the others: built over the cores,
  // then keyed in series order.
  std::vector<nlohmann::json> one(static_cast<size_t>(s1 - s0));
  parallel_each(one.size(), [&](size_t i) {
    const int64_t s = s0 + static_cast<int64_t>(i);
    if (windows(s, s + 1) > 0) one[i] = report_of(s, s + 1);
  });
  nlohmann::json each = nlohmann::json::object();
  for (int64_t s = s0; s < s1; ++s)
    if (!one[s - s0].is_null()) each[s_.fleet[s].id] = std::move(one[s - s0]);
  j["per_series"] = std::move(each);
  return j;
}

double report_metric(const nlohmann::json& report, const std::string& name) {
  if (!report.contains(name) || !report[name].is_number()) return std::numeric_limits<double>::quiet_NaN();
  return report[name].get<double>();
}

}  // namespace seqtrain
