// Series: a table of named float columns over time, as read from a source (CSV, synthetic).
// Row-major [rows, cols] because windows are cut along time: a window's rows are contiguous
// and each row carries every column of one time step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/timestamps.h"

namespace seqtrain {

struct Series {
  std::vector<std::string> columns;
  int64_t rows = 0;
  std::vector<float> values;  // rows * columns.size(), row-major
  // data.time_column: each row's time (data/timestamps.h), increasing; empty without one.
  std::vector<int64_t> times;
  TimeKind time_kind = TimeKind::none;

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
