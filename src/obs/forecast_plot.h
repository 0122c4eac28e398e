// Forecast plots (`predict --plot`, `backtest --plot`): for each series shown and each target, one
// panel with the history before the forecast, the actual values, the forecast (the median level
// of a quantile forecaster) and its quantile bands, drawn as one self-contained SVG: inline
// styles, no script, no external font or stylesheet, so it opens in any browser, in a README
// and in a report alike. Forecasters are read off plots before tables; this is that plot.
//
// Every drawn line and band is one <path> carrying data-kind (history | actual | forecast |
// band), data-series, data-target and, for forecasts and bands, data-fold and data-quantiles,
// so a test (tests/py/forecast_plot_check.py) counts what was drawn without reading pixels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/timestamps.h"

namespace seqtrain {

struct PlotLine {
  std::string kind;          // history | actual | forecast | band
  std::vector<double> x;     // positions: rows within the series, or seconds since 1970
  std::vector<double> y;     // values (a band: its lower level)
  std::vector<double> y_hi;  // a band: its upper level
  int64_t fold = -1;         // forecasts and bands: their fold (backtest) or -1
  double q_lo = 0, q_hi = 0; // a band's levels
};

struct PlotPanel {
  std::string series;  // "" for a run of one series
  std::string target;
  std::string unit;    // "" when unknown
  std::vector<PlotLine> lines;
};

struct PlotOptions {
  std::string title;
  TimeKind time_kind = TimeKind::none;  // none: x is the row within the series
};

// The SVG document of `panels` (at least one), two columns when there are more than two.
std::string forecast_svg(const std::vector<PlotPanel>& panels, const PlotOptions& options);

// The bands a quantile forecast draws: its levels paired from the outside in, (q0, qQ-1),
// (q1, qQ-2), ..., as (lower index, upper index); none for fewer than two levels.
std::vector<std::pair<int64_t, int64_t>> quantile_bands(const std::vector<double>& quantiles);

}  // namespace seqtrain
