// The LR range test's SVG plot: see lr_plot.h.
#include "cli/lr_plot.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "obs/svg_plot.h"

namespace seqtrain {
namespace {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 70, kRight = 690, kTop = 40, kBottom = 380;  // the plot area

}  // namespace

std::string lr_plot_svg(const LrFinderResult& r, const std::string& title) {
  const auto& p = r.points;
  // x: log10(lr) over the points (a single point gets a decade around it).
  double x_lo = std::log10(p.front().lr), x_hi = std::log10(p.back().lr);
  if (x_hi - x_lo < 1e-9) { x_lo -= 0.5; x_hi += 0.5; }
  // y: the smoothed curve whole (4x its best at most, by the early stop); a raw loss beyond it is
  // drawn at the edge.
  double y_lo = p.front().smoothed, y_hi = p.front().smoothed;
  for (const LrPoint& q : p) {
    y_lo = std::min({y_lo, q.smoothed, q.loss});
    y_hi = std::max(y_hi, q.smoothed);
  }
  if (y_hi - y_lo < 1e-12) { y_lo -= 0.5; y_hi += 0.5; }
  const double pad = (y_hi - y_lo) * 0.05;
  y_lo -= pad;
  y_hi += pad;
  auto X = [&](double lr) { return kLeft + (std::log10(lr) - x_lo) / (x_hi - x_lo) * (kRight - kLeft); };
  auto Y = [&](double v) {
    return std::clamp(kBottom - (v - y_lo) / (y_hi - y_lo) * (kBottom - kTop), kTop, kBottom);
  };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<title>LR range test: {2}</title>\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{3}\" y=\"22\" font-size=\"14\">LR range test: {2} (batch {4}, {5} steps)</text>\n",
      kWidth, kHeight, escape_html(title), kLeft, r.batch_size, p.size());
  // Axes, decade ticks and five loss ticks.
  s += fmt::format("<g stroke=\"#444\" fill=\"none\"><path d=\"M{0} {1} V{2} H{3}\"/></g>\n", kLeft, kTop, kBottom, kRight);
  s += "<g fill=\"#444\" text-anchor=\"middle\">\n";
  for (int e = static_cast<int>(std::ceil(x_lo - 1e-9)); e <= static_cast<int>(std::floor(x_hi + 1e-9)); ++e) {
    const double x = X(std::pow(10.0, e));
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\">1e{4}</text>\n", x, kTop, kBottom, kBottom + 16, e);
  }
  s += "</g>\n<g fill=\"#444\" text-anchor=\"end\">\n";
  for (int k = 0; k <= 4; ++k) {
    const double v = y_lo + (y_hi - y_lo) * k / 4.0, y = Y(v);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\">{5:.3g}</text>\n", kLeft, y, kRight, kLeft - 6, y + 4, v);
  }
  s += "</g>\n";
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222\">learning rate (log scale)</text>\n",
                   (kLeft + kRight) / 2, kBottom + 36);
  s += fmt::format("<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" fill=\"#222\" transform=\"rotate(-90 16 {0})\">"
                   "training loss</text>\n", (kTop + kBottom) / 2);
  // The curves.
  auto polyline = [&](bool smoothed, const char* style) {
    std::string pts;
    for (const LrPoint& q : p) pts += fmt::format("{:.1f},{:.1f} ", X(q.lr), Y(smoothed ? q.smoothed : q.loss));
    if (!pts.empty()) pts.pop_back();
    return fmt::format("<polyline fill=\"none\" {} points=\"{}\"/>\n", style, pts);
  };
  s += polyline(false, "stroke=\"#9bb7d4\" stroke-width=\"1\"");
  s += polyline(true, "stroke=\"#1f4e8c\" stroke-width=\"2\"");
  // The minimum and the suggestion.
  const LrPoint& m = p[r.min_index];
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f4e8c\"><title>minimum smoothed loss {:.4g} at "
                   "lr {:.3g}</title></circle>\n", X(m.lr), Y(m.smoothed), m.smoothed, m.lr);
  const double sx = std::clamp(X(r.suggestion), kLeft, kRight);
  s += fmt::format("<g id=\"suggestion\" stroke=\"#c0392b\"><line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" "
                   "stroke-dasharray=\"5 4\" stroke-width=\"1.5\"/></g>\n", sx, kTop, kBottom);
  const bool right_half = sx > (kLeft + kRight) / 2;
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#c0392b\" text-anchor=\"{}\">suggested lr {:.3g} ({})</text>\n",
                   right_half ? sx - 6 : sx + 6, kTop + 14, right_half ? "end" : "start", r.suggestion, escape_html(r.rule));
  s += "</svg>\n";
  return s;
}

}  // namespace seqtrain
