// `seqtrain backtest RUN --input FILE [--folds K --step S | --origins O1,O2,...] [--refit]`:
// rolling-origin evaluation of a forecasting run (train/backtest.h). Each fold forecasts the
// horizon after its origin in every series of --input; the trained model is applied at every
// origin in one pass, or with --refit a model is trained on the rows before each origin (the
// run's config with data.end at the origin; those runs are kept under OUT/refit/fold_<k>).
// Writes OUT (default RUN/backtest) whole or not at all: backtest.csv and backtest.json (each
// fold's and the overall errors beside the baselines', per series for a fleet) and
// predictions.csv, all in the targets' units; --plot draws the folds' forecasts as an SVG.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace seqtrain {

struct BacktestArgs {
  std::string checkpoint, input, out, plot, series;
  int64_t folds = 0, step = 0;  // 0: 5 folds, data.horizon rows apart
  std::vector<std::string> origins;
  std::vector<std::string> units;  // --unit TARGET=UNIT for the plot's axes
  bool refit = false, quiet = false;
};

CLI::App* add_backtest_command(CLI::App& app, BacktestArgs& args);
int run_backtest(const BacktestArgs& args);

}  // namespace seqtrain
