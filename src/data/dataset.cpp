#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "config/suggest.h"
#include "core/error.h"
#include "data/fleet.h"
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
  out.segments = src.segments;
  out.name = src.name;
  std::vector<int64_t> picks;
  for (const auto& name : names) {
    int64_t k = src.column_index(name);
    if (k < 0) {
      const auto in = [&](const std::vector<std::string>& list) {
        return std::find(list.begin(), list.end(), name) != list.end();
      };
      const std::string source = data_source(d).describe(d);
      fail("config key 'data.{}' names column '{}'{}, which {} does not have; it has {}",
           in(d.targets) ? "targets" : in(d.features) || !in(d.static_features) ? "features" : "static_features", name,
           did_you_mean(name, src.columns), source, quoted_list(src.columns));
    }
    picks.push_back(k);
  }
  out.values.resize(static_cast<size_t>(out.rows) * names.size());
  for (int64_t r = 0; r < out.rows; ++r)
    for (size_t c = 0; c < names.size(); ++c) out.at(r, static_cast<int64_t>(c)) = src.at(r, picks[c]);
  return out;
}

}  // namespace

std::vector<std::string> input_columns(const DataConfig& d, const std::vector<std::string>& columns) {
  std::vector<std::string> out = d.features.empty() ? columns : d.features;
  for (const std::string& f : d.static_features)
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  return out;
}

Series load_series(const DataConfig& d) {
  const DataSource& s = data_source(d);
  ST_CHECK(s.kind == SourceKind::series,
           "config key 'data.source' is '{}', but windowed series (and so `seqtrain eval` and `predict` over a CSV) "
           "read {} data; npy and text jobs are evaluated by `seqtrain train` on their test split", d.source,
           source_names_of(SourceKind::series));
  Series out;
  if (s.read_columns && !d.features.empty()) {
    // A source that can read only some columns does, when the features are named.
    out = s.read_columns(d, used_columns(input_columns(d, {}), d.targets));
  } else {
    // Every column is a feature: read them all, then make sure the targets are among them.
    Series all = s.read_all(d);
    out = select_columns(all, used_columns(input_columns(d, all.columns), d.targets), d);
  }
  cut_at_end(out, d);
  check_static_features(out, d);
  return out;
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
  // every file agrees), else by row from the series' first row. The spacing is the first
  // series' (a fleet's series are sampled alike).
  const SeriesSegment first = s.parts().front();
  const int64_t step =
      timed ? time_step(std::vector<int64_t>(s.times.begin() + first.begin, s.times.begin() + first.end)) : 1;
  const std::vector<std::string> names = time_feature_names(d);  // a sine and a cosine per phase below
  std::vector<std::function<double(int64_t)>> phase;  // row -> fraction of the cycle in [0, 1)
  // Without times each series counts its rows from its own first row (a fleet's series start at
  // row 0 of their own file or id, not of the table).
  std::vector<int64_t> row0(static_cast<size_t>(s.rows), 0);
  if (!timed)
    for (const SeriesSegment& p : s.parts()) std::fill(row0.begin() + p.begin, row0.begin() + p.end, p.begin);
  for (int64_t m : d.seasons) {
    phase.push_back([&s, &row0, timed, step, m](int64_t r) {
      // Whole steps since 1970 (floored: times before 1970 are negative), or rows since the series' row 0.
      const int64_t t = timed ? s.times[r] : r - row0[r],
                    k = timed ? (t >= 0 ? t / step : -((-t + step - 1) / step)) : t;
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

void Dataset::denormalize_windows(const WindowDataset& split, int64_t first, float* y, int64_t batch,
                                  int64_t levels) const {
  if (series_normalizers.empty()) return denormalize_targets(y, batch, levels);
  const int64_t per_window = split.y_size() * levels;
  for (int64_t i = 0; i < batch; ++i)
    normalizer_of(split.series_of(first + i)).invert_rows(targets, y + i * per_window, split.horizon(), levels);
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

namespace {

// The statistics the data is scaled with: fitted on every series' training rows together, and
// with data.normalize_scope series also on each series' own (static features keep the global
// ones: constant within a series, they would all scale to 0 by their own).
Normalizer fit_normalizer(const DataConfig& d, const Series& s, const Dataset& ds) {
  std::vector<RowRange> train;
  for (const auto& r : ds.series_splits) train.push_back(r[0]);
  Normalizer n = Normalizer::fit(d.normalize, s, train);
  if (!ds.fleet || d.normalize_scope != "series") return n;
  for (size_t k = 0; k < ds.series.size(); ++k) {
    Normalizer own = Normalizer::fit(d.normalize, s, std::vector<RowRange>{ds.series_splits[k][0]});
    for (const std::string& f : d.static_features) {
      const int64_t c = n.index_of(f);
      own.shift[c] = n.shift[c];
      own.scale[c] = n.scale[c];
    }
    n.series.push_back(ds.series[k].id);
    n.series_shift.push_back(std::move(own.shift));
    n.series_scale.push_back(std::move(own.scale));
  }
  return n;
}

}  // namespace

Dataset load_dataset(const Config& config, const Normalizer* stats) {
  const DataConfig& d = config.data;
  auto series = std::make_shared<Series>(load_series(d));

  Dataset ds;
  // With no features named, load_series kept every source column and the targets had to be
  // among them, so the table's columns are exactly the features.
  ds.features = d.features.empty() ? series->columns : input_columns(d, {});
  ds.targets = d.targets;
  add_time_features(*series, d, &ds.features);
  ds.fleet = !series->segments.empty();
  if (!ds.fleet) {
    ds.splits = split_rows(series->rows, d.split);
    check_split(series->rows, ds.splits, d.split, d.lookback, d.horizon);
    ds.series = series->parts();
    ds.series_splits = {ds.splits};
  } else {
    FleetSplits f = split_fleet(*series, d, data_source(d).describe(d));
    ds.series = std::move(f.series);
    ds.series_splits = std::move(f.splits);
    ds.skipped_series = f.skipped;
    ds.skipped_note = f.skipped_note();
    ds.splits = ds.series_splits[0];
  }

  ds.normalizer = stats ? *stats : fit_normalizer(d, *series, ds);
  // Only the kept series are scaled (a series left out may have no statistics of its own).
  for (const SeriesSegment& p : ds.series) {
    if (ds.normalizer.per_series()) ds.series_normalizers.push_back(ds.normalizer.of_series(p.id));
    const Normalizer& n = ds.normalizer.per_series() ? ds.series_normalizers.back() : ds.normalizer;
    n.apply_rows(*series, p.begin, p.end);
  }
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
  WindowDataset* splits[3] = {&ds.train, &ds.val, &ds.test};
  for (int i = 0; i < 3; ++i) {
    std::vector<RowRange> ranges;
    for (const auto& r : ds.series_splits) ranges.push_back(r[i]);
    *splits[i] = WindowDataset(series, std::move(ranges), fcols, tcols, d.lookback, d.horizon, d.stride, known);
  }
  return ds;
}

}  // namespace seqtrain
