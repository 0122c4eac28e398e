// The LR range test's plot: a self-contained SVG (no scripts, fonts or links to load) of the loss
// against the learning rate on a log axis, each step's loss faint and the smoothed loss bold, the
// minimum and the suggested rate marked and labelled with the rule that chose it. Plain SVG so
// a browser, an image viewer or a README shows it without seqtrain.
#pragma once
#include <string>

#include "train/lr_finder.h"

namespace seqtrain {

// `title` heads the plot (the config's name); the result needs at least one point.
std::string lr_plot_svg(const LrFinderResult& result, const std::string& title);

}  // namespace seqtrain
