// bench_scoring: what scoring forecasts in the targets' units (the errors and the last-value and
// seasonal-naive baselines of every val and test record, train/forecast_scorer.h) adds to an
// epoch with validation (issue 33's budget: at most 3%).
//
//   bench_scoring [--config examples/forecast.yaml] [--threads 2] [--repeats 7] [--json OUT]
//
// Measured paired, on one model and one validation split: each repeat runs the validation pass
// without the scorer, then with it (alternating, so drift hits both alike), and the medians are
// compared. The epoch it is a share of is one `train` epoch of the same config with validation
// (the whole job's time for one epoch, test evaluation included, so the share is if anything an
// overestimate's denominator: smaller). The scorer's setup (MASE scales over the training rows,
// once a run) is timed too.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "config/config.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "models/registry.h"
#include "train/forecast_scorer.h"
#include "train/objective.h"
#include "train/trainer.h"

using namespace seqtrain;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string config = "examples/forecast.yaml", json_out;
  int threads = 2, repeats = 7;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_scoring: a forecast run's scoring against its plain evaluation"};
  app.add_option("--config", a.config);
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--repeats", a.repeats)->check(CLI::PositiveNumber);
  app.add_option("--json", a.json_out);
  bench::parse_flags(app, argc, argv);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Config c = load_config(a.config, {"runtime.threads=" + std::to_string(a.threads), "train.epochs=1",
                                    "data.workers=0"});
  set_cpu_threads(a.threads);
  const Dataset ds = load_dataset(c);
  std::unique_ptr<Model> model = build_model(model_spec(c, ds));
  Rng rng(c.seed);
  model->init(rng);
  LossOptions o;
  o.huber_delta = static_cast<float>(c.train.huber_delta);
  o.backend = &model->params().backend();
  const auto objective = make_objective(parse_loss(c.train.loss), o, ObjectiveTask::forecast);
  const WindowSource val(ds.val);

  auto t0 = bench::Clock::now();
  const ForecastScoring scoring = ForecastScoring::of(ds, c.data.seasons);
  const double setup_ms = bench::ms_since(t0);

  std::vector<double> plain, scored;
  double checksum = 0;
  for (int r = 0; r <= a.repeats; ++r) {  // repeat 0 warms up
    t0 = bench::Clock::now();
    checksum += evaluate(*model, val, window_layout(ds.val), *objective, c.train.batch_size);
    const double p = bench::ms_since(t0);
    ForecastScorer scorer(scoring);
    t0 = bench::Clock::now();
    checksum += evaluate(*model, val, window_layout(ds.val), *objective, c.train.batch_size, nullptr,
                         [&](int64_t n, const float* x, const float* y, const float* pr) { scorer.add(n, x, y, pr); });
    checksum += scorer.report()["mae"].get<double>();
    const double s = bench::ms_since(t0);
    if (r > 0) plain.push_back(p), scored.push_back(s);
  }

  const fs::path run = fs::temp_directory_path() / ("bench_scoring_" + std::to_string(::getpid()));
  t0 = bench::Clock::now();
  train(c, TrainOptions(run.string(), false, true, true));
  const double epoch_ms = bench::ms_since(t0);
  fs::remove_all(run);

  const double overhead_ms = bench::median(scored) - bench::median(plain);
  const json out = {{"config", a.config},
                    {"threads", a.threads},
                    {"val_windows", ds.val.size()},
                    {"val_pass_ms", bench::median(plain)},
                    {"val_pass_scored_ms", bench::median(scored)},
                    {"scoring_ms", overhead_ms},
                    {"scoring_setup_ms", setup_ms},
                    {"epoch_with_validation_ms", epoch_ms},
                    {"share_of_epoch_percent", 100.0 * (overhead_ms + setup_ms) / epoch_ms},
                    {"checksum", checksum}};
  std::printf("%s\n", out.dump(2).c_str());
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}
