// A fleet: many series trained as one model (a lab's battery cells, a utility's meters). Its
// series come from a long-format CSV (data.series_id names the id column), from a glob in
// data.path (one series per file, named by the file's stem) or from data.synthetic.cells, and
// sit one after another in one Series table (Series::segments). What this file adds to the one-
// series path: reading the CSV source either way, data.end (the training data ends at a
// backtest's origin), the data.static_features check, and the per-series chronological split
// that leaves out series too short for one window. Windows never cross a series because each
// split is a list of per-series row ranges (WindowDataset).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/series.h"
#include "data/split.h"

namespace seqtrain {

// data.path holds a glob pattern (*, ? or [), read as one series per matching file.
bool is_glob(const std::string& path);
// The data section reads a fleet: data.series_id, a glob in a csv's data.path, or
// data.synthetic.cells of a synthetic source.
bool is_fleet(const DataConfig& d);

// The csv source: data.path's file, or every file its glob matches (sorted; each file one series
// named by its stem, or the series of its data.series_id column), as one table of `columns`
// (every column but the time and series ones when empty). Errors name data.path, the file and
// the fix: a glob matching nothing, files whose columns or time forms differ, a series id found
// in two files.
Series read_csv_source(const DataConfig& d, const std::vector<std::string>& columns);

// Where data.end cuts each series: rows [0, end_row) stay. `end` is data.end: "" (no cut: rows),
// N > 0 (the first N rows), -N (all but the last N rows) or a date / date-time (the rows before
// it; needs `times`). Never above `rows`, never below 0.
int64_t end_row(const std::string& end, int64_t rows, const int64_t* times);
// data.end applied to every series of `s` in place (a series left with no row is dropped).
void cut_at_end(Series& s, const DataConfig& d);

// data.static_features: each must be constant within every series (it describes the series, not
// a time step). Error naming the column, the series, two rows that differ and the fix.
void check_static_features(const Series& s, const DataConfig& d);

// The name of the column that holds the series' ids in the CSVs a fleet run reads and writes
// (data export, predict, backtest): data.series_id, else "series".
std::string series_column_of(const DataConfig& d);

// A fleet's series split as data.split says, each within its own rows: train first, then val,
// then test, so every split forecasts each series' own future. Series shorter than
// data.lookback + data.horizon are left out and counted; a split with a positive fraction that
// no series gives a window is an Error naming the longest series and what would fix it.
struct FleetSplits {
  std::vector<SeriesSegment> series;             // the series kept, in table order
  std::vector<std::array<RowRange, 3>> splits;   // per kept series: its train, val, test rows (table rows)
  int64_t skipped = 0;                           // series shorter than one window, left out
  std::string skipped_note() const;              // "" or "3 series shorter than ... left out"
  int64_t need = 0;                              // data.lookback + data.horizon
};
FleetSplits split_fleet(const Series& s, const DataConfig& d, const std::string& source);

}  // namespace seqtrain
