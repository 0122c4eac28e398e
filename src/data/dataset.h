// load_dataset: everything the trainer needs from the `data:` section, in one call.
// Source (CSV or synthetic) -> the used columns (features, then targets not already among
// them) -> chronological split -> normalizer fitted on the train rows -> one WindowDataset
// per split over the shared normalized table. A fleet (data/fleet.h) is split within each
// series, scaled globally or per series (data.normalize_scope), and each split's windows are
// cut series by series.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/normalizer.h"
#include "data/series.h"
#include "data/split.h"
#include "data/window_dataset.h"

namespace seqtrain {

struct Dataset {
  WindowDataset train, val, test;       // val / test have size() 0 when their fraction is 0
  Normalizer normalizer;                // one entry per column of `table` (and per series with scope series)
  std::vector<std::string> features;    // input columns, in x's last-axis order
  std::vector<std::string> targets;     // predicted columns, in y's order within a step
  std::array<RowRange, 3> splits;       // rows of train, val, test in the source series (a fleet: its first's)
  std::shared_ptr<const Series> table;  // normalized used columns, every row of the source
  // The series windows are cut from, in table order (WindowDataset::series_of indexes it): one
  // for a single series; a fleet's, without those too short for a window.
  std::vector<SeriesSegment> series;
  std::vector<std::array<RowRange, 3>> series_splits;  // per series: its train, val, test rows
  int64_t skipped_series = 0;           // a fleet's series shorter than data.lookback + data.horizon
  std::string skipped_note;             // "" or what was left out, for the log
  bool fleet = false;                   // several series (data.series_id, a glob, data.synthetic.cells)

  int64_t n_features() const { return static_cast<int64_t>(features.size()); }
  int64_t n_targets() const { return static_cast<int64_t>(targets.size()); }
  // The statistics series k (of `series`) was scaled with.
  const Normalizer& normalizer_of(int64_t k) const {
    return series_normalizers.empty() ? normalizer : series_normalizers[k];
  }
  std::vector<Normalizer> series_normalizers;  // per series with data.normalize_scope series, else empty
  // Each target's position among the features (x's last axis), or empty when some target is no
  // input: where a window's last observed target values are (the last-value forecast).
  std::vector<int64_t> target_feature_indices() const;
  // Maps `batch` rows of normalized outputs laid out like y ([B, horizon * n_targets], with
  // `levels` quantile forecasts innermost when more than 1) back to the data's units, in place.
  void denormalize_targets(float* y, int64_t batch, int64_t levels = 1) const;
  // The same for windows first .. first + batch - 1 of `split`, each with its series' statistics.
  void denormalize_windows(const WindowDataset& split, int64_t first, float* y, int64_t batch,
                           int64_t levels = 1) const;
};

// Reads the source and the columns named by config.data (features empty = every column of
// the source), unnormalized, features first (data.static_features among them) then targets not
// already among them; each series cut at data.end and its static features checked.
Series load_series(const DataConfig& data);
// The run's inputs before time features: data.features (every source column when empty, as
// `columns` lists them), then data.static_features not among them.
std::vector<std::string> input_columns(const DataConfig& data, const std::vector<std::string>& columns);

// data.seasons and data.calendar: appends <name>_sin and <name>_cos for each season m
// (season<m>: the row's phase within m steps) and calendar part (cal_<part>: data/timestamps.h),
// and their names to *features. Why inputs: an RNN over a window shorter than the period cannot
// tell where in the cycle it is; two smooth columns say it, and the phase at the window's end
// gives the forecast steps' too. With data.time_column a season is phased by time, so every file
// agrees; without, by row from the table's first row (a history given to eval/predict/forecast
// is then phased from its own first row).
void add_time_features(Series& s, const DataConfig& d, std::vector<std::string>* features);
// The names of the columns add_time_features adds, in order (season<m>_sin, season<m>_cos, ...,
// cal_<part>_sin, cal_<part>_cos).
std::vector<std::string> time_feature_names(const DataConfig& d);

// When `stats` is given (e.g. from a checkpoint's state.json) it is used instead of fitting,
// so evaluation scales data exactly as training did. Throws Error naming the config key or
// file:line for bad data, missing columns and splits too short for one window.
Dataset load_dataset(const Config& config, const Normalizer* stats = nullptr);

}  // namespace seqtrain
