// Line charts as inline SVG: see svg_plot.h.
#include "obs/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace seqtrain {

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string short_number(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a < 1e-4 || a >= 1e6) return fmt::format("{:.4g}", v);
  // Plain digits in between ("12000", not "1.2e+04"): 4 significant, trailing zeros dropped.
  const int decimals = std::max(0, 3 - static_cast<int>(std::floor(std::log10(a))));
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::vector<double> nice_ticks(double lo, double hi, int target, double min_step) {
  if (!(hi > lo)) return {lo};
  const double raw = std::max((hi - lo) / std::max(target, 1), min_step);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  // k * step, printed to 12 digits and read back: 0.15, not 0.15000000000000002.
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k)
    out.push_back(k == 0 ? 0.0 : std::stod(fmt::format("{:.12g}", k * step)));
  return out;
}

namespace {

// Where the data lands: the plot box inside the margins, and the value ranges mapped onto it.
struct Frame {
  double left = 64, right = 16, top = 30, bottom = 44;
  double width = 0, height = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_y = false;

  double px(double x) const { return left + (x - x0) / (x1 - x0) * (width - left - right); }
  double py(double y) const {
    const double v = log_y ? std::log10(y) : y;
    return height - bottom - (v - y0) / (y1 - y0) * (height - top - bottom);
  }
};

bool usable(const PlotPoint& p, bool log_y) {
  return std::isfinite(p.x) && std::isfinite(p.y) && (!log_y || p.y > 0);
}

// Widens a degenerate range (one value) so that it still maps onto the box.
void widen(double& lo, double& hi) {
  if (hi > lo) return;
  const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
  lo -= pad;
  hi += pad;
}

// Ticks of a log axis from lo to hi (in decades): powers of ten, or 1-2-5 or every digit of each
// decade when the data spans too few decades for three; within one digit, linear round numbers.
std::vector<double> log_ticks(double lo, double hi) {
  const std::vector<std::vector<double>> mantissas = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  std::vector<double> out;
  for (const auto& ms : mantissas) {
    out.clear();
    for (double d = std::floor(lo); d <= std::ceil(hi); ++d)
      for (double m : ms) {
        const double v = m * std::pow(10.0, d);
        if (std::log10(v) >= lo - 1e-9 && std::log10(v) <= hi + 1e-9) out.push_back(v);
      }
    if (out.size() >= 3) return out;
  }
  out.clear();
  for (double t : nice_ticks(std::pow(10.0, lo), std::pow(10.0, hi), 6))
    if (t > 0) out.push_back(t);
  return out;
}

// The box the series land in: log y only when every point can take it, each range widened and
// stretched to its end ticks, the ticks themselves in xt / yt. drawn counts the usable points.
struct FittedFrame {
  Frame f;
  std::vector<double> xt, yt;
  size_t drawn = 0;
};

FittedFrame fit_frame(const ChartOptions& o, const std::vector<PlotSeries>& series) {
  FittedFrame ff;
  Frame& f = ff.f;
  f.width = o.width;
  f.height = o.height;
  bool any_nonpositive = false;
  for (const PlotSeries& s : series)
    for (const PlotPoint& p : s.points)
      if (std::isfinite(p.y) && p.y <= 0) any_nonpositive = true;
  f.log_y = o.log_y && !any_nonpositive;

  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  bool whole_x = true;  // steps and epochs are counts: no tick between two of them
  for (const PlotSeries& s : series)
    for (const PlotPoint& p : s.points)
      if (usable(p, f.log_y)) {
        ++ff.drawn;
        xmin = std::min(xmin, p.x);
        xmax = std::max(xmax, p.x);
        const double y = f.log_y ? std::log10(p.y) : p.y;
        ymin = std::min(ymin, y);
        ymax = std::max(ymax, y);
        if (p.x != std::round(p.x)) whole_x = false;
      }
  if (ff.drawn == 0) return ff;
  // Linear y starts at 0 when the data sits not far above it (a throughput, a share), so that
  // small wobbles do not look like collapses.
  if (!f.log_y && ymin > 0 && ymin < 0.5 * ymax) ymin = 0;
  widen(xmin, xmax);
  widen(ymin, ymax);
  ff.yt = f.log_y ? log_ticks(ymin, ymax) : nice_ticks(ymin, ymax, 5);
  ff.xt = nice_ticks(xmin, xmax, 6, whole_x ? 1.0 : 0.0);
  if (!f.log_y && !ff.yt.empty()) {  // the axis ends on ticks
    ymin = std::min(ymin, ff.yt.front());
    ymax = std::max(ymax, ff.yt.back());
  }
  f.x0 = xmin;
  f.x1 = xmax;
  f.y0 = ymin;
  f.y1 = ymax;
  return ff;
}

// The grid with its tick labels, the frame and both axis labels.
std::string axes_svg(const ChartOptions& o, const FittedFrame& ff) {
  const Frame& f = ff.f;
  const double bx0 = f.left, bx1 = f.width - f.right, by0 = f.top, by1 = f.height - f.bottom;
  std::string out = "<g class=\"grid\">\n";
  for (double t : ff.yt) {
    const double y = f.py(t);
    if (y < by0 - 0.5 || y > by1 + 0.5) continue;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
                       "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       bx0, y, bx1, y, bx0 - 6, y + 4, short_number(t));
  }
  for (double t : ff.xt) {
    const double x = f.px(t);
    if (x < bx0 - 0.5 || x > bx1 + 0.5) continue;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
                       "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       x, by0, x, by1, x, by1 + 16, short_number(t));
  }
  out += "</g>\n";
  out += fmt::format("<rect class=\"frame\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>\n", bx0, by0,
                     bx1 - bx0, by1 - by0);
  out += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                     (bx0 + bx1) / 2, f.height - 8.0, escape_html(o.x_label));
  out += fmt::format("<text class=\"axis\" transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}{}</text>\n",
                     (by0 + by1) / 2, escape_html(o.y_label), f.log_y ? " (log)" : "");
  return out;
}

// One series' path (and its dots), or nothing when none of its points is usable.
std::string series_svg(const Frame& f, const PlotSeries& s) {
  std::string d, dots;
  size_t n = 0;
  for (const PlotPoint& p : s.points) {
    if (!usable(p, f.log_y)) continue;
    const double x = f.px(p.x), y = f.py(p.y);
    d += fmt::format("{}{:.1f} {:.1f}", n == 0 ? "M" : " L", x, y);
    if (s.markers || s.points.size() == 1) dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>", x, y);
    ++n;
  }
  if (n == 0) return "";
  // data-points counts what was drawn, so a test sees a NaN left out as a missing point.
  return fmt::format("<g class=\"series\" data-run=\"{0}\" data-series=\"{1}\" style=\"color:{2}\">"
                     "<path d=\"{3}\" data-run=\"{0}\" data-series=\"{1}\" data-points=\"{4}\" fill=\"none\" "
                     "stroke=\"currentColor\" stroke-width=\"1.8\"{5}><title>{6}</title></path>{7}</g>\n",
                     escape_html(s.run), escape_html(s.series), escape_html(s.color), d, n,
                     s.dashed ? " stroke-dasharray=\"6 4\"" : "", escape_html(s.label),
                     dots.empty() ? "" : "<g class=\"dots\" fill=\"currentColor\">" + dots + "</g>");
}

}  // namespace

std::string line_chart(const ChartOptions& o, const std::vector<PlotSeries>& series) {
  const FittedFrame ff = fit_frame(o, series);
  std::string out = fmt::format(
      "<svg class=\"chart\" id=\"{0}\" data-chart=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {1} {2}\" "
      "width=\"{1}\" height=\"{2}\" role=\"img\" aria-label=\"{3}\">\n<title>{3}</title>\n"
      "<text class=\"title\" x=\"{4}\" y=\"18\">{3}</text>\n",
      escape_html(o.id), o.width, o.height, escape_html(o.title), ff.f.left);
  if (ff.drawn == 0) {
    out += fmt::format("<text class=\"empty\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data in these runs</text>\n</svg>\n",
                       o.width / 2, o.height / 2);
    return out;
  }
  out += axes_svg(o, ff);
  for (const PlotSeries& s : series) out += series_svg(ff.f, s);
  out += "</svg>\n";
  return out;
}

}  // namespace seqtrain
