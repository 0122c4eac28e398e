// The panels of the forecast plots. See plot_panels.h.
#include "cli/plot_panels.h"

#include <algorithm>
#include <cmath>

#include "config/suggest.h"
#include "core/error.h"
#include "data/fleet.h"
#include "data/sources.h"

namespace seqtrain {

std::vector<int64_t> plotted_series(const Dataset& data, const std::string& series, int64_t most) {
  std::vector<std::string> ids;
  for (const SeriesSegment& s : data.series) ids.push_back(s.id);
  if (series.empty()) {
    std::vector<int64_t> out;
    for (int64_t k = 0; k < std::min<int64_t>(most, static_cast<int64_t>(ids.size())); ++k) out.push_back(k);
    return out;
  }
  const auto it = std::find(ids.begin(), ids.end(), series);
  ST_CHECK(it != ids.end(), "--series '{}' names no series of the data{}; it has {} series ({}{}){}", series,
           did_you_mean(series, ids), ids.size(),
           quoted_list(std::vector<std::string>(ids.begin(), ids.begin() + std::min<ptrdiff_t>(ids.size(), 6))),
           ids.size() > 6 ? ", ..." : "", data.fleet ? "" : ": a run of one series needs no --series");
  return {it - ids.begin()};
}

namespace {

// The unit of `target`: --unit's, else the source's own, else "".
std::string unit_of(const DataConfig& d, const std::string& target, const std::vector<std::string>& units) {
  for (const std::string& u : units) {
    const size_t eq = u.find('=');
    ST_CHECK(eq != std::string::npos && eq > 0, "--unit '{}': write it as TARGET=UNIT, e.g. co2=ppm", u);
    if (u.substr(0, eq) == target) return u.substr(eq + 1);
  }
  for (const auto& [column, unit] : data_source(d).units)
    if (column == target) return unit;
  return "";
}

}  // namespace

PlotPanel forecast_panel(const Dataset& data, const DataConfig& d, int64_t k, int64_t t,
                         const std::vector<DrawnForecast>& forecasts, const std::vector<double>& quantiles,
                         int64_t history, const std::vector<std::string>& units) {
  const SeriesSegment& s = data.series[k];
  const Series& table = *data.table;
  const Normalizer& norm = data.normalizer_of(k);
  const std::string& target = data.targets[t];
  const int64_t col = table.column_index(target), stat = norm.index_of(target);
  const bool timed = !table.times.empty();
  auto at = [&](int64_t row) { return timed ? static_cast<double>(table.times[row]) : static_cast<double>(row - s.begin); };
  PlotPanel p{data.fleet ? s.id : "", target, unit_of(d, target, units), {}};
  int64_t first = s.end, last = s.begin;
  for (const DrawnForecast& f : forecasts) {
    first = std::min(first, f.origin);
    last = std::max(last, f.origin + static_cast<int64_t>(f.point.size()));
  }
  last = std::min(last, s.end);
  // History runs into the first actual value, so the two lines meet.
  PlotLine h{"history", {}, {}, {}, -1, 0, 0}, a{"actual", {}, {}, {}, -1, 0, 0};
  for (int64_t r = std::max(s.begin, first - history); r <= first && r < s.end; ++r) {
    h.x.push_back(at(r));
    h.y.push_back(norm.invert(stat, table.at(r, col)));
  }
  for (int64_t r = first; r < last; ++r) {
    a.x.push_back(at(r));
    a.y.push_back(norm.invert(stat, table.at(r, col)));
  }
  p.lines.push_back(std::move(h));
  p.lines.push_back(std::move(a));
  const int64_t Q = std::max<int64_t>(1, static_cast<int64_t>(quantiles.size()));
  for (const DrawnForecast& f : forecasts) {
    PlotLine line{"forecast", {}, {}, {}, f.fold, 0, 0};
    for (size_t h = 0; h < f.point.size(); ++h) {
      line.x.push_back(at(std::min(f.origin + static_cast<int64_t>(h), s.end - 1)));
      line.y.push_back(f.point[h]);
    }
    for (const auto& [lo, hi] : quantile_bands(quantiles)) {
      PlotLine band{"band", line.x, {}, {}, f.fold, quantiles[lo], quantiles[hi]};
      for (size_t h = 0; h < f.point.size(); ++h) {
        band.y.push_back(f.levels[h * Q + lo]);
        band.y_hi.push_back(f.levels[h * Q + hi]);
      }
      p.lines.push_back(std::move(band));
    }
    p.lines.push_back(std::move(line));
  }
  return p;
}

PlotOptions plot_options(const Dataset& data, const std::string& title) {
  return PlotOptions{title, data.table->times.empty() ? TimeKind::none : data.table->time_kind};
}

}  // namespace seqtrain
