// LineChart: a line chart as an inline <svg> element. seqtrain draws its report's charts itself,
// as text, so that the page is one self-contained file: it opens from a disk, an e-mail or a CI
// artifact without a network, a script library or a server, and it says the same thing in ten
// years. Each series is one <path> carrying what a test (or a reader's script) needs to check
// what was drawn without parsing coordinates: data-run, data-series and data-points.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace seqtrain {

struct PlotPoint {
  double x = 0, y = 0;
};

struct PlotSeries {
  std::string run;     // data-run: the run it belongs to
  std::string series;  // data-series: what it is, e.g. train_loss, val_loss, lr
  std::string label;   // its tooltip: "<run> <what>"
  std::string color;   // a CSS colour: the run's
  bool dashed = false;   // validation beside training's solid line
  bool markers = false;  // a dot at each point (series with a point an epoch or fewer)
  std::vector<PlotPoint> points;  // in x order; points with a non-finite x or y are left out
};

struct ChartOptions {
  std::string id;       // the <svg>'s id and data-chart
  std::string title;
  std::string x_label, y_label;
  // Log scale on y (losses fall over decades); linear when some y is not positive.
  bool log_y = false;
  int width = 620, height = 300;
};

// The chart as one <svg> element: axes with round-number ticks, the series, and "no data" when
// no series has a point.
std::string line_chart(const ChartOptions& options, const std::vector<PlotSeries>& series);

// About `target` round numbers (1, 2 or 5 times a power of ten) spanning [lo, hi], at least
// `min_step` apart (1 for counts such as steps and epochs).
std::vector<double> nice_ticks(double lo, double hi, int target, double min_step = 0);

// Text safe inside HTML/SVG elements and double-quoted attributes.
std::string escape_html(std::string_view text);

// A number as a tick label or table cell: 4 significant digits, no trailing noise.
std::string short_number(double v);

}  // namespace seqtrain
