// Synthetic price windows: see synthetic_windows.h.
#include "data/synthetic_windows.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace seqtrain {

WindowSplit make_window_split(const WindowTaskOptions& o) {
  ST_CHECK(o.samples >= 1 && o.steps >= 64, "synthetic windows: need samples >= 1 and steps >= 64");
  const int64_t T = o.steps;
  Rng rng(mix_seed(mix_seed(o.seed, 0x0c1e), o.split));
  WindowSplit s;
  s.x.resize(static_cast<size_t>(o.samples * T * 4));
  s.labels.resize(static_cast<size_t>(o.samples));
  std::vector<double> ret(static_cast<size_t>(T));
  for (int64_t i = 0; i < o.samples; ++i) {
    const int64_t label = static_cast<int64_t>(rng.below(2));
    const double vol = 0.004 + 0.008 * rng.uniform();  // per-bar return std
    for (double& r : ret) r = vol * rng.normal();
    // The pole: 6-12 bars of strong rise, starting so the aftermath fits in the window.
    const int64_t pole = 6 + static_cast<int64_t>(rng.below(7));
    const int64_t after = 24 + static_cast<int64_t>(rng.below(9));
    const int64_t start = T / 4 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(T - T / 4 - pole - after)));
    for (int64_t t = start; t < start + pole; ++t) ret[static_cast<size_t>(t)] += 2.0 * vol;
    const double gain = 2.0 * vol * static_cast<double>(pole);
    for (int64_t t = start + pole; t < start + pole + after; ++t) {
      double& r = ret[static_cast<size_t>(t)];
      if (label == 1) {  // a quiet flag drifting slightly down, then the breakout's last bars
        r *= 0.4;
        r += t < start + pole + after - 4 ? -0.1 * gain / static_cast<double>(after) : 1.5 * vol;
      } else {  // the rise given back over the aftermath
        r -= 0.9 * gain / static_cast<double>(after);
      }
    }
    float* xi = s.x.data() + i * T * 4;
    double close = 1.0;
    for (int64_t t = 0; t < T; ++t) {
      const double open = close;
      close = open * std::exp(ret[static_cast<size_t>(t)]);
      const double high = std::max(open, close) * (1.0 + std::fabs(0.5 * vol * rng.normal()));
      const double low = std::min(open, close) * (1.0 - std::fabs(0.5 * vol * rng.normal()));
      const double bar[4] = {open, high, low, close};
      for (int64_t f = 0; f < 4; ++f) xi[t * 4 + f] = static_cast<float>(100.0 * (bar[f] - 1.0));
    }
    s.labels[static_cast<size_t>(i)] = label;
  }
  return s;
}

}  // namespace seqtrain
