#include "data/dataset.h"

#include <algorithm>
#include <cmath>

#include "config/suggest.h"
#include "core/error.h"
#include "data/csv.h"
#include "data/synthetic.h"

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
  std::vector<int64_t> picks;
  for (const auto& name : names) {
    int64_t k = src.column_index(name);
    if (k < 0) {
      bool is_target = std::find(d.targets.begin(), d.targets.end(), name) != d.targets.end();
      std::string source = d.source == "csv" ? "the CSV file '" + d.path + "'" : "the synthetic source";
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
  if (d.source == "csv") {
    if (d.features.empty()) {
      // Every column is a feature: read them all, then make sure the targets are among them.
      Series all = read_csv(d.path, {}, d.nan_policy);
      return select_columns(all, used_columns(all.columns, d.targets), d);
    }
    return read_csv(d.path, used_columns(d.features, d.targets), d.nan_policy);
  }
  ST_CHECK(d.source == "synthetic",
           "config key 'data.source' is '{}', but windowed series (and so `seqtrain eval` and `predict`) read csv or "
           "synthetic data; npy and text jobs are evaluated by `seqtrain train` on their test split", d.source);
  Series all = make_synthetic(d.synthetic);
  return select_columns(all, used_columns(d.features.empty() ? all.columns : d.features, d.targets), d);
}

void add_season_columns(Series& s, const std::vector<int64_t>& seasons, std::vector<std::string>* features) {
  if (seasons.empty()) return;
  const int64_t old_cols = s.cols();
  std::vector<std::string> names;
  for (int64_t m : seasons)
    for (const char* part : {"_sin", "_cos"}) {
      const std::string name = "season" + std::to_string(m) + part;
      ST_CHECK(s.column_index(name) < 0,
               "config key 'data.seasons' adds the input column '{}', but the data already has a column of that "
               "name: rename that column", name);
      names.push_back(name);
    }
  const int64_t cols = old_cols + static_cast<int64_t>(names.size());
  std::vector<float> values(static_cast<size_t>(s.rows * cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    std::copy_n(s.values.begin() + r * old_cols, old_cols, values.begin() + r * cols);
    for (size_t k = 0; k < seasons.size(); ++k) {
      const double phase = 2 * 3.14159265358979323846 * static_cast<double>(r % seasons[k]) / seasons[k];
      values[r * cols + old_cols + 2 * k] = static_cast<float>(std::sin(phase));
      values[r * cols + old_cols + 2 * k + 1] = static_cast<float>(std::cos(phase));
    }
  }
  s.values = std::move(values);
  for (const auto& n : names) {
    s.columns.push_back(n);
    if (features) features->push_back(n);
  }
}

void Dataset::denormalize_targets(float* y, int64_t batch) const {
  normalizer.invert_rows(targets, y, batch * train.horizon());
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
  add_season_columns(*series, d.seasons, &ds.features);
  ds.splits = split_rows(series->rows, d.split);
  check_split(series->rows, ds.splits, d.split, d.lookback, d.horizon);

  ds.normalizer = stats ? *stats : Normalizer::fit(d.normalize, *series, ds.splits[0].begin, ds.splits[0].end);
  ds.normalizer.apply(*series);
  ds.table = series;

  std::vector<int64_t> fcols, tcols;
  for (const auto& f : ds.features) fcols.push_back(series->column_index(f));
  for (const auto& t : ds.targets) tcols.push_back(series->column_index(t));
  ds.train = WindowDataset(series, ds.splits[0], fcols, tcols, d.lookback, d.horizon, d.stride);
  ds.val = WindowDataset(series, ds.splits[1], fcols, tcols, d.lookback, d.horizon, d.stride);
  ds.test = WindowDataset(series, ds.splits[2], fcols, tcols, d.lookback, d.horizon, d.stride);
  return ds;
}

}  // namespace seqtrain
