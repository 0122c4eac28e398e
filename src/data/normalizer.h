// Normalizer: per-column affine scaling, z = (x - shift) / scale, fitted on training rows only
// so that no statistic of validation or test data leaks into training. Saved in checkpoints'
// state.json so eval/predict scale new data exactly as training did and can map predictions
// back to the original units.
//   zscore: shift = mean, scale = population std (ddof 0); a constant column gets scale 1.
//   minmax: shift = min, scale = max - min (so min -> 0, max -> 1); range 0 gets scale 1.
//   none:   shift = 0, scale = 1.
// A fleet with data.normalize_scope series also keeps each series' own statistics (fitted on that
// series' training rows): a meter of 2 kW and one of 200 kW then both reach the model near unit
// scale, and each series' outputs map back with its own. of_series() is the one way to them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/series.h"
#include "data/split.h"

namespace seqtrain {

struct Normalizer {
  std::string method = "none";          // zscore | minmax | none
  std::vector<std::string> columns;     // column names, in the order of shift/scale
  std::vector<double> shift;
  std::vector<double> scale;
  // data.normalize_scope series: the series' ids and, per series, shift and scale per column (in
  // the order of `columns`). Empty: every series shares shift / scale.
  std::vector<std::string> series;
  std::vector<std::vector<double>> series_shift, series_scale;

  // Statistics of every column of `s` over rows [row_begin, row_end) (non-empty).
  static Normalizer fit(const std::string& method, const Series& s, int64_t row_begin, int64_t row_end);
  // Over the rows of several ranges together (a fleet's training rows, series after series);
  // one range gives exactly the statistics above.
  static Normalizer fit(const std::string& method, const Series& s, const std::vector<RowRange>& ranges);

  bool per_series() const { return !series.empty(); }
  // The statistics series `id` is scaled with: these, or that series' own (per_series()). A
  // series without statistics of its own is an Error naming it and the series that have them.
  Normalizer of_series(const std::string& id) const;

  // Scales every column of `s` in place, each series (Series::parts) with its own statistics.
  // Columns are matched by name, so the series may order them differently; a column of `s` the
  // normalizer does not know is an Error.
  void apply(Series& s) const;
  // Rows [begin, end) of `s` with these statistics (shift / scale only).
  void apply_rows(Series& s, int64_t begin, int64_t end) const;

  // Column `col` (index into columns): one value forward or back.
  float apply(int64_t col, float x) const { return static_cast<float>((x - shift[col]) / scale[col]); }
  float invert(int64_t col, float z) const { return static_cast<float>(z * scale[col] + shift[col]); }
  // In place over n values spaced `stride` floats apart, e.g. one target in a batch of outputs.
  void invert(int64_t col, float* values, int64_t n, int64_t stride = 1) const;
  // In place over `rows` rows of the columns `names`, laid out [rows, names.size(), levels] (a
  // forecast's steps of its targets, with `levels` quantile forecasts of each innermost).
  void invert_rows(const std::vector<std::string>& names, float* values, int64_t rows, int64_t levels = 1) const;

  // Index of `name` in columns; throws Error listing the known columns when absent.
  int64_t index_of(const std::string& name) const;

  // {"method": ..., "columns": [...], "shift": [...], "scale": [...]}, plus "series",
  // "series_shift" and "series_scale" with per-series statistics; doubles round-trip exactly.
  nlohmann::json to_json() const;
  // Throws Error naming the bad field (e.g. "normalizer.scale[2]") for malformed input.
  static Normalizer from_json(const nlohmann::json& j);

  bool operator==(const Normalizer&) const = default;
};

}  // namespace seqtrain
