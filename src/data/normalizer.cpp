#include "data/normalizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "config/suggest.h"
#include "core/error.h"

namespace seqtrain {

Normalizer Normalizer::fit(const std::string& method, const Series& s, int64_t row_begin, int64_t row_end) {
  ST_CHECK(0 <= row_begin && row_begin < row_end && row_end <= s.rows,
           "Normalizer::fit: rows [{}, {}) are not a non-empty range of the {} rows", row_begin, row_end, s.rows);
  return fit(method, s, std::vector<RowRange>{{row_begin, row_end}});
}

Normalizer Normalizer::fit(const std::string& method, const Series& s, const std::vector<RowRange>& ranges) {
  ST_CHECK(method == "zscore" || method == "minmax" || method == "none",
           "data.normalize must be zscore, minmax or none, got '{}'", method);
  int64_t rows = 0;
  for (const RowRange& r : ranges) {
    ST_CHECK(0 <= r.begin && r.begin <= r.end && r.end <= s.rows, "Normalizer::fit: rows [{}, {}) outside the {} rows",
             r.begin, r.end, s.rows);
    rows += r.size();
  }
  ST_CHECK(rows > 0, "Normalizer::fit: no rows to fit on");
  Normalizer n;
  n.method = method;
  n.columns = s.columns;
  n.shift.assign(s.columns.size(), 0.0);
  n.scale.assign(s.columns.size(), 1.0);
  if (method == "none") return n;
  const double count = static_cast<double>(rows);
  for (int64_t c = 0; c < s.cols(); ++c) {
    if (method == "zscore") {
      // Two passes in double: the textbook one-pass formula loses digits when |mean| >> std,
      // which is exactly the voltage column (mean 3.7 V, std tens of mV).
      double sum = 0;
      for (const RowRange& rr : ranges)
        for (int64_t r = rr.begin; r < rr.end; ++r) sum += s.at(r, c);
      double mean = sum / count;
      double sq = 0;
      for (const RowRange& rr : ranges)
        for (int64_t r = rr.begin; r < rr.end; ++r) {
          double d = s.at(r, c) - mean;
          sq += d * d;
        }
      double sd = std::sqrt(sq / count);
      n.shift[c] = mean;
      n.scale[c] = sd > 0 ? sd : 1.0;
    } else {
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (const RowRange& rr : ranges)
        for (int64_t r = rr.begin; r < rr.end; ++r) {
          lo = std::min(lo, static_cast<double>(s.at(r, c)));
          hi = std::max(hi, static_cast<double>(s.at(r, c)));
        }
      n.shift[c] = lo;
      n.scale[c] = hi > lo ? hi - lo : 1.0;
    }
  }
  return n;
}

Normalizer Normalizer::of_series(const std::string& id) const {
  if (!per_series()) return *this;
  const auto it = std::find(series.begin(), series.end(), id);
  if (it == series.end())
    fail("series '{}' has no normalization statistics of its own{}: the run was trained with data.normalize_scope "
         "series on {} series ({}{}); give only series it was trained on, or train with data.normalize_scope global",
         id, did_you_mean(id, series), series.size(), quoted_list(std::vector<std::string>(
             series.begin(), series.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(series.size(), 5)))),
         series.size() > 5 ? ", ..." : "");
  const size_t k = static_cast<size_t>(it - series.begin());
  Normalizer n;
  n.method = method;
  n.columns = columns;
  n.shift = series_shift[k];
  n.scale = series_scale[k];
  return n;
}

int64_t Normalizer::index_of(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return static_cast<int64_t>(i);
  fail("the normalizer has no statistics for column '{}'{}; it knows {}. The data's columns must match the "
       "ones the model was trained on",
       name, did_you_mean(name, columns), quoted_list(columns));
}

void Normalizer::apply(Series& s) const {
  if (!per_series()) return apply_rows(s, 0, s.rows);
  for (const SeriesSegment& p : s.parts()) of_series(p.id).apply_rows(s, p.begin, p.end);
}

void Normalizer::apply_rows(Series& s, int64_t begin, int64_t end) const {
  std::vector<int64_t> map(s.columns.size());
  for (size_t c = 0; c < s.columns.size(); ++c) map[c] = index_of(s.columns[c]);
  const int64_t cols = s.cols();
  for (int64_t r = begin; r < end; ++r)
    for (int64_t c = 0; c < cols; ++c) s.values[r * cols + c] = apply(map[c], s.values[r * cols + c]);
}

void Normalizer::invert(int64_t col, float* values, int64_t n, int64_t stride) const {
  ST_CHECK(0 <= col && col < static_cast<int64_t>(columns.size()), "Normalizer::invert: column {} of {}", col,
           columns.size());
  for (int64_t i = 0; i < n; ++i) values[i * stride] = invert(col, values[i * stride]);
}

void Normalizer::invert_rows(const std::vector<std::string>& names, float* values, int64_t rows,
                             int64_t levels) const {
  const int64_t n = static_cast<int64_t>(names.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t q = 0; q < levels; ++q) invert(index_of(names[t]), values + t * levels + q, rows, n * levels);
}

nlohmann::json Normalizer::to_json() const {
  nlohmann::json j = {{"method", method}, {"columns", columns}, {"shift", shift}, {"scale", scale}};
  if (per_series()) {
    j["series"] = series;
    j["series_shift"] = series_shift;
    j["series_scale"] = series_scale;
  }
  return j;
}

Normalizer Normalizer::from_json(const nlohmann::json& j) {
  auto need = [&](const char* key, bool ok, const char* what) {
    if (!ok)
      fail("normalizer{}{}: expected {}; the saved normalization statistics are damaged", *key ? "." : "", key,
           what);
  };
  need("", j.is_object(), "an object with method, columns, shift and scale");
  need("method", j.contains("method") && j["method"].is_string(), "a string");
  need("columns", j.contains("columns") && j["columns"].is_array(), "a list of column names");
  need("shift", j.contains("shift") && j["shift"].is_array(), "a list of numbers");
  need("scale", j.contains("scale") && j["scale"].is_array(), "a list of numbers");
  Normalizer n;
  n.method = j["method"].get<std::string>();
  need("method", n.method == "zscore" || n.method == "minmax" || n.method == "none", "zscore, minmax or none");
  const size_t k = j["columns"].size();
  need("shift", j["shift"].size() == k, "one number per column");
  need("scale", j["scale"].size() == k, "one number per column");
  for (size_t i = 0; i < k; ++i) {
    const auto& name = j["columns"][i];
    const auto& sh = j["shift"][i];
    const auto& sc = j["scale"][i];
    if (!name.is_string()) fail("normalizer.columns[{}]: expected a column name; the statistics are damaged", i);
    if (!sh.is_number() || !std::isfinite(sh.get<double>()))
      fail("normalizer.shift[{}]: expected a finite number; the statistics are damaged", i);
    if (!sc.is_number() || !(sc.get<double>() > 0) || !std::isfinite(sc.get<double>()))
      fail("normalizer.scale[{}]: expected a positive finite number; the statistics are damaged", i);
    n.columns.push_back(name.get<std::string>());
    n.shift.push_back(sh.get<double>());
    n.scale.push_back(sc.get<double>());
  }
  if (!j.contains("series")) return n;
  need("series", j["series"].is_array(), "a list of series ids");
  const size_t m = j["series"].size();
  for (const char* key : {"series_shift", "series_scale"}) {
    need(key, j.contains(key) && j[key].is_array() && j[key].size() == m, "one list per series");
    for (const auto& row : j[key]) {
      need(key, row.is_array() && row.size() == k, "one number per column for each series");
      for (const auto& v : row)
        need(key, v.is_number() && std::isfinite(v.get<double>()), "finite numbers");
    }
  }
  for (size_t i = 0; i < m; ++i) {
    need("series", j["series"][i].is_string(), "a list of series ids");
    n.series.push_back(j["series"][i].get<std::string>());
    n.series_shift.push_back(j["series_shift"][i].get<std::vector<double>>());
    n.series_scale.push_back(j["series_scale"][i].get<std::vector<double>>());
    for (double v : n.series_scale.back()) need("series_scale", v > 0, "positive numbers");
  }
  return n;
}

}  // namespace seqtrain
