// CSV source: a header row of column names, then one row of numbers per time step.
// Only the requested columns are parsed, so a file may carry text columns (timestamps, ids)
// that the job does not use. Missing values (empty cells, nan, inf) follow nan_policy.
#pragma once
#include <string>
#include <vector>

#include "data/series.h"

namespace seqtrain {

// Reads `columns` (in that order; every column of the header when empty) from the CSV at
// `path`. nan_policy: "error" (fail naming file:line:col), "drop" (skip the row), "ffill"
// (repeat the previous kept row's value; fails on the first data row). Cells may be quoted
// with '"'; spaces around cells are ignored; blank lines are skipped; "\r\n" endings are fine.
// Throws Error naming file:line[:col] for ragged rows, non-numeric cells and missing columns.
// time_column (data.time_column), when not empty: that column's cells parsed as timestamps into
// Series::times (one per kept row), which must increase strictly, all of one kind; the column
// need not be among `columns`.
// series_column (data.series_id), when not empty: a long-format file of many series. That
// column's cells (text) name each row's series; the rows are grouped into Series::segments, one
// per id in order of first appearance, each keeping its rows' order; times increase and ffill
// repeats within a series.
// `text` as one cell of a CSV line: quoted (with "" for a quote) when it holds a comma, a quote or
// surrounding space, as the reader above reads it back.
std::string csv_cell(const std::string& text);

// The column names of a CSV's header row (its first non-blank line); Error naming the file when it
// cannot be read or is empty.
std::vector<std::string> read_csv_header(const std::string& path);

Series read_csv(const std::string& path, const std::vector<std::string>& columns, const std::string& nan_policy,
                const std::string& time_column = "", const std::string& series_column = "");

}  // namespace seqtrain
