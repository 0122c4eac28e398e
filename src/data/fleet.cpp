// A fleet's reading, cutting, checking and splitting. See fleet.h.
#include "data/fleet.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "config/scalar.h"
#include "config/suggest.h"
#include "core/error.h"
#include "core/parallel_each.h"
#include "data/concat.h"
#include "data/csv.h"
#include "data/sources.h"

namespace seqtrain {
namespace fs = std::filesystem;

bool is_glob(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

bool is_fleet(const DataConfig& d) {
  const DataSource& s = data_source(d);
  return s.fleet && s.fleet(d);
}

namespace {

// Every file of a glob read on its own thread, up to the machine's cores: a fleet of a thousand
// files is parse-bound, and the files are independent.
std::vector<Series> read_files(const std::vector<std::string>& files, const DataConfig& d,
                               const std::vector<std::string>& columns) {
  std::vector<Series> out(files.size());
  parallel_each(files.size(), [&](size_t i) {
    out[i] = read_csv(files[i], columns, d.nan_policy, d.time_column, d.series_id);
    if (out[i].segments.empty()) out[i].segments = out[i].parts();  // the file's stem names its series
  });
  return out;
}

// The files' tables one after another; their columns and time forms must agree.
Series join_files(std::vector<Series> parts, const std::vector<std::string>& files) {
  Series s;
  s.columns = parts[0].columns;
  s.time_kind = parts[0].time_kind;
  std::map<std::string, size_t> seen;  // series id -> file
  int64_t rows = 0;
  for (const Series& p : parts) rows += p.rows;
  s.values.reserve(static_cast<size_t>(rows * s.cols()));
  for (size_t i = 0; i < parts.size(); ++i) {
    Series& p = parts[i];
    ST_CHECK(p.columns == s.columns,
             "data.path: {} has the columns {} but {} has {}; every file of the glob needs the same columns (or name "
             "them in data.features and data.targets)", files[i], quoted_list(p.columns), files[0],
             quoted_list(s.columns));
    ST_CHECK(p.time_kind == s.time_kind,
             "data.path: the time column '{}' of {} is written differently from {}'s; write every file's times in "
             "one form", "data.time_column", files[i], files[0]);
    for (SeriesSegment seg : p.segments) {
      const auto [it, added] = seen.try_emplace(seg.id, i);
      ST_CHECK(added, "data.path: the series '{}' is in both {} and {}; give each series one file (or one id)", seg.id,
               files[it->second], files[i]);
      seg.begin += s.rows;
      seg.end += s.rows;
      s.segments.push_back(std::move(seg));
    }
    s.values.insert(s.values.end(), p.values.begin(), p.values.end());
    s.times.insert(s.times.end(), p.times.begin(), p.times.end());
    s.rows += p.rows;
    p = Series{};  // its memory back before the next file is copied
  }
  return s;
}

}  // namespace

Series read_csv_source(const DataConfig& d, const std::vector<std::string>& columns) {
  if (!is_glob(d.path)) return read_csv(d.path, columns, d.nan_policy, d.time_column, d.series_id);
  const std::vector<std::string> files = glob_files(d.path, "data.path");
  return join_files(read_files(files, d, columns), files);
}

int64_t end_row(const std::string& end, int64_t rows, const int64_t* times) {
  if (end.empty()) return rows;
  if (const auto n = parse_int64(end)) return std::clamp<int64_t>(*n > 0 ? *n : rows + *n, 0, rows);
  const std::optional<Timestamp> t = parse_timestamp(end);
  ST_CHECK(t && times, "config key 'data.end' is '{}': {}", end,
           t ? "a time needs data.time_column (give a row count instead: N keeps the first N rows of each series, -N "
               "all but the last N)"
             : "expected a row count (N or -N) or a date / date-time like 2001-06-30");
  return std::lower_bound(times, times + rows, t->seconds) - times;
}

void cut_at_end(Series& s, const DataConfig& d) {
  if (d.end.empty()) return;
  const int64_t cols = s.cols();
  const bool timed = !s.times.empty();
  Series out;
  out.columns = s.columns;
  out.time_kind = s.time_kind;
  out.name = s.name;
  for (const SeriesSegment& p : s.parts()) {
    const int64_t keep = end_row(d.end, p.rows(), timed ? s.times.data() + p.begin : nullptr);
    if (keep == 0) continue;
    out.values.insert(out.values.end(), s.values.begin() + p.begin * cols, s.values.begin() + (p.begin + keep) * cols);
    if (timed) out.times.insert(out.times.end(), s.times.begin() + p.begin, s.times.begin() + p.begin + keep);
    if (!s.segments.empty()) out.segments.push_back({p.id, out.rows, out.rows + keep});
    out.rows += keep;
  }
  ST_CHECK(out.rows > 0, "config key 'data.end' is '{}', which leaves no row of the data; give an end after the "
           "first rows", d.end);
  s = std::move(out);
}

void check_static_features(const Series& s, const DataConfig& d) {
  for (const std::string& name : d.static_features) {
    const int64_t c = s.column_index(name);
    ST_CHECK(c >= 0, "config key 'data.static_features' names '{}'{}, which the data does not have; it has {}", name,
             did_you_mean(name, s.columns), quoted_list(s.columns));
    for (const SeriesSegment& p : s.parts())
      for (int64_t r = p.begin + 1; r < p.end; ++r)
        ST_CHECK(s.at(r, c) == s.at(p.begin, c),
                 "config key 'data.static_features' names '{}', but it changes within the series{}: row {} of the "
                 "series holds {} and row {} holds {}; a static feature is one value per series (move '{}' to "
                 "data.features if it varies over time)", name, p.id.empty() ? "" : " '" + p.id + "'", 0,
                 s.at(p.begin, c), r - p.begin, s.at(r, c), name);
  }
}

std::string series_column_of(const DataConfig& d) { return d.series_id.empty() ? "series" : d.series_id; }

std::string FleetSplits::skipped_note() const {
  if (skipped == 0) return "";
  return fmt::format("{} series shorter than data.lookback + data.horizon = {} rows left out", skipped, need);
}

FleetSplits split_fleet(const Series& s, const DataConfig& d, const std::string& source) {
  FleetSplits f;
  f.need = d.lookback + d.horizon;
  const SeriesSegment* longest = nullptr;
  for (const SeriesSegment& p : s.parts()) {
    if (!longest || p.rows() > longest->rows()) longest = &p;
    if (p.rows() < f.need) {
      ++f.skipped;
      continue;
    }
    std::array<RowRange, 3> r = split_rows(p.rows(), d.split);
    for (RowRange& x : r) x = {x.begin + p.begin, x.end + p.begin};
    f.series.push_back(p);
    f.splits.push_back(r);
  }
  ST_CHECK(!f.series.empty(),
           "every one of the {} series of {} is shorter than one window (data.lookback + data.horizon = {} rows); the "
           "longest, '{}', has {} rows: give longer series, or lower data.lookback or data.horizon",
           s.parts().size(), source, f.need, longest->id, longest->rows());
  static const char* names[3] = {"train", "validation", "test"};
  for (int i = 0; i < 3; ++i) {
    if (d.split[i] <= 0) continue;
    size_t best = 0;
    for (size_t k = 0; k < f.series.size(); ++k)
      if (f.splits[k][i].size() > f.splits[best][i].size()) best = k;
    if (f.splits[best][i].size() >= f.need) continue;
    fail("data.split [{}, {}, {}] gives no series of {} a whole window in its {} split: the longest such split (series "
         "'{}') has {} rows, but one window needs data.lookback + data.horizon = {}; use longer series, "
         "raise that fraction or lower data.lookback{}", d.split[0], d.split[1], d.split[2], source, names[i],
         f.series[best].id, f.splits[best][i].size(), f.need,
         i == 0 ? "" : ", or set that fraction to 0 to have no such split");
  }
  return f;
}

}  // namespace seqtrain
