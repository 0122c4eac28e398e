// Synthetic price windows (`seqtrain data windows`): the data moola's pipeline pretrains on, in its
// shape: windows of 105 bars of open, high, low and close (F = 4), most of them unlabelled and a
// few hundred labelled. Every window is a random walk whose volatility differs per window; at a
// random bar a sharp rise (the "pole") starts, and what follows it is the label: 1 = the rise
// holds in a quiet, slightly drifting consolidation and breaks out up again (a flag, a
// continuation), 0 = the rise is given back (a reversal). The pattern sits at a different bar in
// every window and is a handful of bars among 105 in noise, so a classifier trained on a few
// hundred labels alone overfits, while masked pretraining on the unlabelled windows learns what
// bars look like. Prices are percent moves from the window's first open. Deterministic in the seed.
#pragma once
#include <cstdint>
#include <vector>

namespace seqtrain {

struct WindowTaskOptions {
  int64_t samples = 1000;  // windows in the split
  int64_t steps = 105;     // bars per window
  uint64_t seed = 0;
  uint64_t split = 0;      // a split's own stream
};

struct WindowSplit {
  std::vector<float> x;         // [samples, steps, 4]: open, high, low, close
  std::vector<int64_t> labels;  // [samples]: 1 continuation, 0 reversal
};

WindowSplit make_window_split(const WindowTaskOptions& options);

}  // namespace seqtrain
