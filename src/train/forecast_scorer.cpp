// Forecast scoring. See forecast_scorer.h.
#include "train/forecast_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/normalizer.h"

namespace seqtrain {

int64_t ForecastScoring::point_level() const {
  for (size_t q = 0; q < quantiles.size(); ++q)
    if (quantiles[q] == 0.5) return static_cast<int64_t>(q);
  return levels() / 2;
}

ForecastScoring ForecastScoring::of(const Dataset& d, const std::vector<int64_t>& seasons,
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
  const Series& table = *d.table;
  const RowRange rows = d.splits[0];
  for (const std::string& t : d.targets) {
    const int64_t col = d.normalizer.index_of(t);
    s.unit_shift.push_back(d.normalizer.shift[col]);
    s.unit_scale.push_back(d.normalizer.scale[col]);
    // The MASE denominator: the lag-m naive's in-sample MAE over the training rows, in units.
    const int64_t tc = table.column_index(t);
    std::vector<float> v(rows.end - rows.begin);
    for (int64_t r = rows.begin; r < rows.end; ++r) v[r - rows.begin] = d.normalizer.invert(col, table.at(r, tc));
    s.mase_scale.push_back(naive_scale(v.data(), static_cast<int64_t>(v.size()), 1, s.mase_lag));
  }
  // A target among the features is the same column of the table, so it maps back the same way.
  s.x_shift = s.unit_shift;
  s.x_scale = s.unit_scale;
  return s;
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

ForecastScorer::ForecastScorer(const ForecastScoring& s)
    : s_(s), model_(s.targets.size()), last_(s.targets.size()), seasonal_(s.targets.size()) {}

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
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      const float* xs = x ? x + i * s_.x_steps * F : nullptr;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t k = i * H * T + h * T + t;
        const float actual = units(y[k], s_.unit_scale[t], s_.unit_shift[t]);
        const float* levels = p + k * Q;
        model_[t].add(units(levels[point], s_.unit_scale[t], s_.unit_shift[t]), actual);
        if (Q > 1) {
          for (int64_t q = 0; q < Q; ++q) {
            const double e = actual - units(levels[q], s_.unit_scale[t], s_.unit_shift[t]), tau = s_.quantiles[q];
            pinball_ += std::max(tau * e, (tau - 1) * e);
          }
          pinball_n_ += Q;
          const float lo = units(levels[0], s_.unit_scale[t], s_.unit_shift[t]);
          const float hi = units(levels[Q - 1], s_.unit_scale[t], s_.unit_shift[t]);
          covered_ += lo <= actual && actual <= hi;
          ++interval_n_;
        }
        if (!s_.baselines() || !xs) continue;
        const int64_t f = s_.target_in_x[t];
        last_[t].add(units(xs[(L - 1) * F + f], s_.x_scale[t], s_.x_shift[t]), actual);
        if (s_.season > 0)
          seasonal_[t].add(units(xs[seasonal_source_step(L, s_.season, h) * F + f], s_.x_scale[t], s_.x_shift[t]),
                           actual);
      }
    }
}

// Every target's errors pooled; MASE as the targets' mean, since their MAEs are in different units.
ForecastMetrics ForecastScorer::pooled(const std::vector<ErrorSums>& e) const {
  ErrorSums all;
  double mase = 0;
  for (size_t t = 0; t < e.size(); ++t) {
    all += e[t];
    mase += metrics_of(e[t], s_.mase_scale.empty() ? 0.0 : s_.mase_scale[t]).mase / static_cast<double>(e.size());
  }
  ForecastMetrics m = metrics_of(all, 0);
  m.mase = mase;
  return m;
}

namespace {
nlohmann::json to_json(const ForecastMetrics& m) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"mae", num(m.mae)}, {"rmse", num(m.rmse)}, {"mape", num(m.mape)}, {"smape", num(m.smape)},
          {"mase", num(m.mase)}};
}
}  // namespace

nlohmann::json ForecastScorer::metrics_json(const std::vector<ErrorSums>& e, bool per_target) const {
  nlohmann::json j = to_json(pooled(e));
  if (per_target && e.size() > 1) {
    nlohmann::json each = nlohmann::json::object();
    for (size_t t = 0; t < e.size(); ++t)
      each[s_.targets[t]] = to_json(metrics_of(e[t], s_.mase_scale.empty() ? 0.0 : s_.mase_scale[t]));
    j["per_target"] = each;
  }
  return j;
}

nlohmann::json ForecastScorer::report() const {
  nlohmann::json j = metrics_json(model_, true);
  if (s_.levels() > 1 && pinball_n_ > 0) {
    j["pinball"] = pinball_ / static_cast<double>(pinball_n_);
    j["coverage"] = static_cast<double>(covered_) / static_cast<double>(interval_n_);
    j["interval"] = {s_.quantiles.front(), s_.quantiles.back()};
  }
  if (s_.baselines()) {
    j["baseline"]["last_value"] = metrics_json(last_, true);
    if (s_.season > 0) j["baseline"]["seasonal_naive"] = metrics_json(seasonal_, true);
  }
  return j;
}

double report_metric(const nlohmann::json& report, const std::string& name) {
  if (!report.contains(name) || !report[name].is_number()) return std::numeric_limits<double>::quiet_NaN();
  return report[name].get<double>();
}

}  // namespace seqtrain
