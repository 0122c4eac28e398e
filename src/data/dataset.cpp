#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "config/suggest.h"
#include "core/error.h"
#include "data/sources.h"

namespace seqtrain {
namespace {

// The features (all source columns when none are named), then targets not already listed.
std::vector<std::string> used_columns(const std::vector<std::string>& features,
                                      const std::vector<std::string>& targets) {
  std::vector<std::string> out = features;
  for (const auto& t : targets)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

Series select_columns(const Series& src, const std::vector<std::string>& names, const DataConfig& d) {
  Series out;
  out.columns = names;
  out.rows = src.rows;
  out.times = src.times;
  out.time_kind = src.time_kind;
  std::vector<int64_t> picks;
  for (const auto& name : names) {
    int64_t k = src.column_index(name);
    if (k < 0) {
      bool is_target = std::find(d.targets.begin(), d.targets.end(), name) != d.targets.end();
      const std::string source = data_source(d).describe(d);
      fail("config key 'data.{}' names column '{}'{}, which {} does not have; it has {}",
           is_target ? "targets" : "features", name, did_you_mean(name, src.columns), source,
           quoted_list(src.columns));
    }
    picks.push_back(k);
  }
  out.values.resize(static_cast<size_t>(out.rows) * names.size());
  for (int64_t r = 0; r < out.rows; ++r)
    for (size_t c = 0; c < names.size(); ++c) out.at(r, static_cast<int64_t>(c)) = src.at(r, picks[c]);
  return out;
}

}  // namespace

Series load_series(const DataConfig& d) {
  const DataSource& s = data_source(d);
  ST_CHECK(s.kind == SourceKind::series,
           "config key 'data.source' is '{}', but windowed series (and so `seqtrain eval` and `predict` over a CSV) "
           "read {} data; npy and text jobs are evaluated by `seqtrain train` on their test split", d.source,
           source_names_of(SourceKind::series));
  // A source that can read only some columns does, when the features are named.
  if (s.read_columns && !d.features.empty()) return s.read_columns(d, used_columns(d.features, d.targets));
  // Every column is a feature: read them all, then make sure the targets are among them.
  Series all = s.read_all(d);
  return select_columns(all, used_columns(d.features.empty() ? all.columns : d.features, d.targets), d);
}

std::vector<std::string> time_feature_names(const DataConfig& d) {
  std::vector<std::string> out;
  for (int64_t m : d.seasons)
    for (const char* part : {"_sin", "_cos"}) out.push_back("season" + std::to_string(m) + part);
  for (const std::string& c : d.calendar)
    for (const char* part : {"_sin", "_cos"}) out.push_back("cal_" + c + part);
  return out;
}

void add_time_features(Series& s, const DataConfig& d, std::vector<std::string>* features) {
  if (d.seasons.empty() && d.calendar.empty()) return;
  const bool timed = !s.times.empty();
  ST_CHECK(d.calendar.empty() || (timed && s.time_kind != TimeKind::number),
           "config key 'data.calendar' derives inputs from dates, but the time column '{}' of {} holds plain numbers: "
           "write its cells as dates (2024-03-05 13:30), or remove data.calendar", d.time_column, d.path);
  // A season's phase: the row's place in the period, by time when there is a time column (so
  // every file agrees), else by row from the table's first row.
  const int64_t step = timed ? time_step(s.times) : 1;
  const std::vector<std::string> names = time_feature_names(d);  // a sine and a cosine per phase below
  std::vector<std::function<double(int64_t)>> phase;  // row -> fraction of the cycle in [0, 1)
  for (int64_t m : d.seasons) {
    phase.push_back([&s, timed, step, m](int64_t r) {
      // Whole steps since 1970 (floored: times before 1970 are negative), or rows since row 0.
      const int64_t t = timed ? s.times[r] : r, k = timed ? (t >= 0 ? t / step : -((-t + step - 1) / step)) : r;
      return static_cast<double>(((k % m) + m) % m) / static_cast<double>(m);
    });
  }
  for (const std::string& part : d.calendar)
    phase.push_back([&s, part](int64_t r) { return *calendar_fraction(part, s.times[r]); });
  const int64_t old_cols = s.cols(), cols = old_cols + static_cast<int64_t>(names.size());
  for (const std::string& n : names)
    ST_CHECK(s.column_index(n) < 0,
             "config key 'data.{}' adds the input column '{}', but the data already has a column of that name: "
             "rename that column", n.rfind("cal_", 0) == 0 ? "calendar" : "seasons", n);
  std::vector<float> values(static_cast<size_t>(s.rows * cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    std::copy_n(s.values.begin() + r * old_cols, old_cols, values.begin() + r * cols);
    for (size_t k = 0; k < phase.size(); ++k) {
      const double angle = 2 * 3.14159265358979323846 * phase[k](r);
      values[r * cols + old_cols + 2 * k] = static_cast<float>(std::sin(angle));
      values[r * cols + old_cols + 2 * k + 1] = static_cast<float>(std::cos(angle));
    }
  }
  s.values = std::move(values);
  for (const std::string& n : names) {
    s.columns.push_back(n);
    if (features) features->push_back(n);
  }
}

void Dataset::denormalize_targets(float* y, int64_t batch, int64_t levels) const {
  normalizer.invert_rows(targets, y, batch * train.horizon(), levels);
}

std::vector<int64_t> Dataset::target_feature_indices() const {
  std::vector<int64_t> out;
  for (const auto& t : targets) {
    auto it = std::find(features.begin(), features.end(), t);
    if (it == features.end()) return {};
    out.push_back(it - features.begin());
  }
  return out;
}

Dataset load_dataset(const Config& config, const Normalizer* stats) {
  const DataConfig& d = config.data;
  auto series = std::make_shared<Series>(load_series(d));

  Dataset ds;
  // With no features named, load_series kept every source column and the targets had to be
  // among them, so the table's columns are exactly the features.
  ds.features = d.features.empty() ? series->columns : d.features;
  ds.targets = d.targets;
  add_time_features(*series, d, &ds.features);
  ds.splits = split_rows(series->rows, d.split);
  check_split(series->rows, ds.splits, d.split, d.lookback, d.horizon);

  ds.normalizer = stats ? *stats : Normalizer::fit(d.normalize, *series, ds.splits[0].begin, ds.splits[0].end);
  ds.normalizer.apply(*series);
  ds.table = series;

  std::vector<int64_t> fcols, tcols;
  for (const auto& f : ds.features) fcols.push_back(series->column_index(f));
  for (const auto& t : ds.targets) tcols.push_back(series->column_index(t));
  std::vector<uint8_t> known(d.future_features.empty() ? 0 : ds.features.size(), 0);
  for (const std::string& f : d.future_features) {
    const auto it = std::find(ds.features.begin(), ds.features.end(), f);
    ST_CHECK(it != ds.features.end(),
             "config key 'data.future_features' names '{}', which is not an input of this run ({}{}); the inputs are "
             "{}: add the column to the data and to data.features, or remove it from data.future_features", f,
             data_source(d).describe(d), did_you_mean(f, ds.features),
             quoted_list(ds.features));
    known[it - ds.features.begin()] = 1;
  }
  ds.train = WindowDataset(series, ds.splits[0], fcols, tcols, d.lookback, d.horizon, d.stride, known);
  ds.val = WindowDataset(series, ds.splits[1], fcols, tcols, d.lookback, d.horizon, d.stride, known);
  ds.test = WindowDataset(series, ds.splits[2], fcols, tcols, d.lookback, d.horizon, d.stride, known);
  return ds;
}

}  // namespace seqtrain
