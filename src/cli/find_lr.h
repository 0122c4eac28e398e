// `seqtrain find-lr CONFIG [--set ...] [--start 1e-7 --end 10 --steps 100] [--out DIR]`: the LR
// range test (train/lr_finder.h) on CONFIG's training data. Prints each step's lr and loss and a
// suggested train.optimizer.lr with the rule that chose it, and writes lr_find.csv and
// lr_find.svg (the plot, cli/lr_plot.h) into --out (default find_lr/<config name>). It trains a
// model built fresh from the config and writes nothing else: a run directory given as --out is
// refused, and bad options are refused before any work, with nothing written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace seqtrain {

struct FindLrArgs {
  std::string config;
  std::vector<std::string> overrides;
  double start = 1e-7, end = 10.0;
  int64_t steps = 100;
  std::string out;
};

CLI::App* add_find_lr_command(CLI::App& app, FindLrArgs& args);
int run_find_lr(const FindLrArgs& args);

}  // namespace seqtrain
