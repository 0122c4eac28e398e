// Series: a table of named float columns over time, as read from a source (CSV, synthetic).
// Row-major [rows, cols] because windows are cut along time: a window's rows are contiguous
// and each row carries every column of one time step. A fleet (data.series_id, a glob in
// data.path, data.synthetic.cells) is several series in one table, each a contiguous run of
// rows named by its id, so one normalization pass and one window index serve them all while
// windows, splits and per-series statistics still stop at each series' ends.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/timestamps.h"

namespace seqtrain {

// One series of a fleet: its id (the data.series_id cell, the file's stem, cell_007) and rows.
struct SeriesSegment {
  std::string id;
  int64_t begin = 0, end = 0;  // rows [begin, end) of the table
  int64_t rows() const { return end - begin; }
  bool operator==(const SeriesSegment&) const = default;
};

struct Series {
  std::vector<std::string> columns;
  int64_t rows = 0;
  std::vector<float> values;  // rows * columns.size(), row-major
  // data.time_column: each row's time (data/timestamps.h), increasing; empty without one.
  std::vector<int64_t> times;
  TimeKind time_kind = TimeKind::none;

  // A fleet's series in table order; empty: the whole table is one series (parts() says so).
  std::vector<SeriesSegment> segments;
  // A one-series table's id: a CSV file's stem, so a fleet run given one file of its glob finds
  // that series' statistics. Unused when there are segments.
  std::string name;

  // The series of the table: `segments`, or one series of every row named `name`.
  std::vector<SeriesSegment> parts() const {
    return segments.empty() ? std::vector<SeriesSegment>{{name, 0, rows}} : segments;
  }
  int64_t cols() const { return static_cast<int64_t>(columns.size()); }
  float at(int64_t row, int64_t col) const { return values[row * cols() + col]; }
  float& at(int64_t row, int64_t col) { return values[row * cols() + col]; }
  // Position of `name` in columns, or -1.
  int64_t column_index(const std::string& name) const {
    for (size_t i = 0; i < columns.size(); ++i)
      if (columns[i] == name) return static_cast<int64_t>(i);
    return -1;
  }
};

}  // namespace seqtrain
