// The forecast plot's SVG. See forecast_plot.h. Layout in plain numbers (no text measuring: a
// glyph is taken as 0.58 of the font size, as bench/plot_svg.py does).
#include "obs/forecast_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/error.h"
#include "obs/svg_plot.h"

namespace seqtrain {
namespace {

constexpr double kPanelW = 460, kPanelH = 250, kLeft = 64, kRight = 14, kTop = 30, kBottom = 40;
constexpr double kFont = 12;
constexpr const char* kHistory = "#7f7f7f", *kActual = "#000000", *kForecast = "#0072B2";

// A 1-2-5 step giving about `target` intervals over span.
double nice_step(double span, int target) {
  const double raw = span / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

struct Axis {
  double lo = 0, hi = 1, p0 = 0, p1 = 1;  // data range -> pixel range
  double at(double v) const { return p0 + (v - lo) / (hi - lo) * (p1 - p0); }
};

// The data range of every value of the panel's lines on one axis, padded; a flat range widened.
std::pair<double, double> range_of(const PlotPanel& p, bool x_axis) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const PlotLine& l : p.lines)
    for (const auto* v : {x_axis ? &l.x : &l.y, x_axis ? &l.x : &l.y_hi})
      for (double d : *v)
        if (std::isfinite(d)) lo = std::min(lo, d), hi = std::max(hi, d);
  if (!(lo <= hi)) return {0, 1};
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = std::max(1.0, std::abs(hi)) * 0.05;
    return {lo - pad, hi + pad};
  }
  if (!x_axis) {
    const double pad = (hi - lo) * 0.06;
    return {lo - pad, hi + pad};
  }
  return {lo, hi};
}

constexpr double kDay = 86400;

// A step for a time axis: whole hours, days, weeks, months or years, about `target` of them over span.
double time_step_of(double span, int target) {
  for (double s : {3600.0, 6 * 3600.0, kDay, 7 * kDay, 30.4375 * kDay, 91.3125 * kDay, 182.625 * kDay,
                   365.25 * kDay, 2 * 365.25 * kDay, 5 * 365.25 * kDay, 10 * 365.25 * kDay, 25 * 365.25 * kDay})
    if (span / s <= target) return s;
  return nice_step(span / (365.25 * kDay), target) * 365.25 * kDay;
}

std::string tick_label(double v, double step, TimeKind kind) {
  if (kind != TimeKind::none && kind != TimeKind::number) {
    // Dates written 2024-03-05 whatever the file's form; as coarse as the step.
    const std::string t = format_timestamp(static_cast<int64_t>(std::llround(v)), TimeKind::datetime);
    return step >= 365 * kDay ? t.substr(0, 4) : step >= 28 * kDay ? t.substr(0, 7) : step >= kDay ? t.substr(0, 10) : t;
  }
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
  return fmt::format("{:.{}f}", v, decimals);
}

// The path of a line (points with a non-finite value are skipped), or of a band: along the upper
// edge, back along the lower one, closed.
std::string path_of(const PlotLine& l, const Axis& x, const Axis& y) {
  std::string d;
  auto point = [&](double px, double py) {
    d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L", x.at(px), y.at(py));
  };
  for (size_t i = 0; i < l.x.size(); ++i) {
    const double v = l.kind == "band" ? l.y_hi[i] : l.y[i];
    if (std::isfinite(v)) point(l.x[i], v);
  }
  if (l.kind == "band") {
    for (size_t i = l.x.size(); i-- > 0;)
      if (std::isfinite(l.y[i])) point(l.x[i], l.y[i]);
    d += " Z";
  }
  return d;
}

std::string panel_svg(const PlotPanel& p, double ox, double oy, const PlotOptions& o) {
  const auto [xlo, xhi] = range_of(p, true);
  const auto [ylo, yhi] = range_of(p, false);
  Axis x{xlo, xhi, ox + kLeft, ox + kPanelW - kRight};
  Axis y{ylo, yhi, oy + kPanelH - kBottom, oy + kTop};
  std::string s = fmt::format("<g class=\"panel\" data-series=\"{}\" data-target=\"{}\">\n", escape_html(p.series), escape_html(p.target));
  const std::string title = p.series.empty() ? p.target : p.series + " \u2014 " + p.target;
  s += fmt::format("<text class=\"panel-title\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" font-weight=\"bold\">{}</text>\n",
                   x.p0, oy + kTop - 10, kFont + 1, escape_html(title));
  // Gridlines and ticks.
  const bool dates = o.time_kind != TimeKind::none && o.time_kind != TimeKind::number;
  const double ystep = nice_step(yhi - ylo, 5), xstep = dates ? time_step_of(xhi - xlo, 6) : nice_step(xhi - xlo, 5);
  for (double v = std::ceil(ylo / ystep) * ystep; v <= yhi + 1e-9 * ystep; v += ystep) {
    s += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n", x.p0, x.p1,
                     y.at(v), y.at(v));
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"end\">{}</text>\n",
                     x.p0 - 5, y.at(v) + 4, kFont - 2, escape_html(tick_label(v, ystep, TimeKind::none)));
  }
  // The x ticks: multiples of the step, or on a date axis with a step of a month or more, the first
  // day of every step-th month (years: 1 January of years divisible by the step's years).
  std::vector<double> xticks;
  if (dates && xstep >= 28 * kDay) {
    const int months = static_cast<int>(std::lround(xstep / (30.4375 * kDay)));
    const std::string t = format_timestamp(static_cast<int64_t>(xlo), TimeKind::date);
    int year = std::stoi(t.substr(0, 4)), month = std::stoi(t.substr(5, 2)) - 1;  // months since year 0
    for (int m = (year * 12 + month) / months * months;; m += months) {
      const auto at = parse_timestamp(fmt::format("{:04d}-{:02d}-01", m / 12, m % 12 + 1));
      if (!at || static_cast<double>(at->seconds) > xhi) break;
      if (static_cast<double>(at->seconds) >= xlo) xticks.push_back(static_cast<double>(at->seconds));
    }
  } else {
    for (double v = std::ceil(xlo / xstep) * xstep; v <= xhi + 1e-9 * xstep; v += xstep) xticks.push_back(v);
  }
  for (double v : xticks)
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\"/>\n"
                     "<text class=\"tick\" x=\"{0:.1f}\" y=\"{3:.1f}\" font-size=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
                     x.at(v), y.p0, y.p0 + 4, y.p0 + 15, kFont - 2, escape_html(tick_label(v, xstep, o.time_kind)));
  // Axes and their labels: the target and its unit, the row or the time.
  s += fmt::format("<path class=\"axis\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f}\" fill=\"none\" stroke=\"#555\"/>\n",
                   x.p0, y.p1, x.p0, y.p0, x.p1, y.p0);
  const std::string ylabel = p.unit.empty() ? p.target : p.target + " [" + p.unit + "]";
  s += fmt::format("<text class=\"axis-label\" transform=\"translate({:.1f},{:.1f}) rotate(-90)\" font-size=\"{}\" "
                   "text-anchor=\"middle\">{}</text>\n", ox + 14, (y.p0 + y.p1) / 2, kFont - 1, escape_html(ylabel));
  const char* xlabel = o.time_kind == TimeKind::none ? "row of the series" : "time";
  s += fmt::format("<text class=\"axis-label\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   (x.p0 + x.p1) / 2, y.p0 + 31, kFont - 1, xlabel);
  // Bands first (under the lines), then history, actual and forecasts.
  for (const char* kind : {"band", "history", "actual", "forecast"})
    for (const PlotLine& l : p.lines) {
      if (l.kind != kind) continue;
      std::string attrs = fmt::format("data-kind=\"{}\" data-series=\"{}\" data-target=\"{}\"", l.kind, escape_html(p.series),
                                      escape_html(p.target));
      if (l.fold >= 0) attrs += fmt::format(" data-fold=\"{}\"", l.fold);
      std::string style;
      if (l.kind == "band") {
        attrs += fmt::format(" data-quantiles=\"{}-{}\"", l.q_lo, l.q_hi);
        style = fmt::format("fill=\"{}\" fill-opacity=\"0.22\" stroke=\"none\"", kForecast);
      } else {
        const char* colour = l.kind == "history" ? kHistory : l.kind == "actual" ? kActual : kForecast;
        style = fmt::format("fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}", colour,
                            l.kind == "forecast" ? 2 : 1.4, l.kind == "actual" ? " stroke-dasharray=\"4 2\"" : "");
      }
      s += fmt::format("<path {} {} d=\"{}\"/>\n", attrs, style, path_of(l, x, y));
    }
  return s + "</g>\n";
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> quantile_bands(const std::vector<double>& quantiles) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t q = static_cast<int64_t>(quantiles.size());
  for (int64_t i = 0; i < q / 2; ++i) out.push_back({i, q - 1 - i});
  return out;
}

std::string forecast_svg(const std::vector<PlotPanel>& panels, const PlotOptions& o) {
  ST_CHECK(!panels.empty(), "forecast_svg: nothing to draw");
  const int64_t cols = panels.size() > 2 ? 2 : 1, rows = (static_cast<int64_t>(panels.size()) + cols - 1) / cols;
  const double legend_h = 28, title_h = 30;
  const double width = cols * kPanelW, height = title_h + legend_h + rows * kPanelH;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      "<text class=\"title\" x=\"{2}\" y=\"20\" font-size=\"{3}\" font-weight=\"bold\">{4}</text>\n",
      width, height, kLeft, kFont + 3, escape_html(o.title));
  // The legend: what each kind of line is (bands only when some panel has one).
  std::vector<std::pair<double, double>> bands;  // the levels of every band drawn, once each
  for (const PlotPanel& p : panels)
    for (const PlotLine& l : p.lines)
      if (l.kind == "band" && std::find(bands.begin(), bands.end(), std::pair{l.q_lo, l.q_hi}) == bands.end())
        bands.push_back({l.q_lo, l.q_hi});
  double lx = kLeft;
  const double ly = title_h + 12;
  auto entry = [&](const std::string& swatch, const std::string& label) {
    s += swatch + fmt::format("<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\">{}</text>\n", lx + 26,
                              ly + 4, kFont - 1, escape_html(label));
    lx += 40 + label.size() * (kFont - 1) * 0.58;
  };
  for (const auto& [kind, colour, label] :
       {std::tuple{"history", kHistory, "history"}, {"actual", kActual, "actual"}, {"forecast", kForecast, "forecast"}})
    entry(fmt::format("<line class=\"legend-swatch\" data-kind=\"{}\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" "
                      "y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", kind, lx, lx + 20, ly, ly, colour,
                      std::string(kind) == "actual" ? " stroke-dasharray=\"4 2\"" : ""),
          label);
  if (!bands.empty()) {
    std::string label = bands.size() > 1 ? "quantile bands" : "quantile band";
    for (size_t i = 0; i < bands.size(); ++i)
      label += fmt::format("{}{}\u2013{}", i ? ", " : " ", bands[i].first, bands[i].second);
    entry(fmt::format("<rect class=\"legend-swatch\" data-kind=\"band\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"20\" "
                      "height=\"10\" fill=\"{}\" fill-opacity=\"0.22\"/>\n", lx, ly - 5, kForecast),
          label);
  }
  for (size_t i = 0; i < panels.size(); ++i)
    s += panel_svg(panels[i], static_cast<double>(static_cast<int64_t>(i) % cols) * kPanelW,
                   title_h + legend_h + static_cast<double>(static_cast<int64_t>(i) / cols) * kPanelH, o);
  return s + "</svg>\n";
}

}  // namespace seqtrain
