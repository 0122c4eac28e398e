// What `predict --plot` and `backtest --plot` draw, from a run's data and forecasts: which series
// (--series, else the first few of a fleet), each target's history and actual values in its
// units, the forecasts with their quantile bands, and the axes' units. obs/forecast_plot.h draws.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "obs/forecast_plot.h"

namespace seqtrain {

// The series (indices into data.series) a plot shows: the one --series names (an Error naming it,
// a close match and the series there are when absent), else the first `most`.
std::vector<int64_t> plotted_series(const Dataset& data, const std::string& series, int64_t most = 4);

// One forecast to draw: its first row (a table row), its fold (-1: none) and per step its point
// forecast and levels ([H][Q], empty for a point forecaster).
struct DrawnForecast {
  int64_t origin = 0, fold = -1;
  std::vector<float> point, levels;
};

// The panel of series k and target t: `history` rows before the first forecast, the actual values
// from there to the end of the last forecast (as far as the data goes), and each forecast with
// its bands. Units: --unit TARGET=UNIT (`units`), else the source's own (the synthetic cell's).
PlotPanel forecast_panel(const Dataset& data, const DataConfig& d, int64_t k, int64_t t,
                         const std::vector<DrawnForecast>& forecasts, const std::vector<double>& quantiles,
                         int64_t history, const std::vector<std::string>& units);

// The plot's options: its title and, with data.time_column, time on the x axis.
PlotOptions plot_options(const Dataset& data, const std::string& title);

}  // namespace seqtrain
