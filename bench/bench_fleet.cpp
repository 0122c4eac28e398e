// bench_fleet: a fleet's data path and backtest cost (issue 38's speed targets):
//   1. a fleet of --series series x --rows rows loads, normalizes and windows (load_dataset, per-
//      series statistics) in under 2 s on 2 cores: the synthetic fleet (data.synthetic.cells), and
//      the same cells as a glob of CSV files, one a series (written once into --csv-dir);
//   2. training on it keeps the loader's data wait under 2% of step time (--train-steps steps of
//      the fleet run, the data record's data_wait_share);
//   3. a --folds-fold backtest without refit costs at most 1.2x one evaluation pass over the same
//      windows (Backtest's setup and run against evaluate() over those windows, plain and scored
//      as `seqtrain eval` scores them, alternating).
//
//   bench_fleet [--series 1000] [--rows 10000] [--threads 2] [--folds 5] [--repeats 3]
//               [--train-steps 200] [--csv-dir DIR] [--json OUT]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
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
#include "data/synthetic.h"
#include "models/registry.h"
#include "train/backtest.h"
#include "train/objective.h"
#include "train/trainer.h"

using namespace seqtrain;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Args {
  int64_t series = 1000, rows = 10000, folds = 5, train_steps = 200;
  int threads = 2, repeats = 3;
  std::string csv_dir = (fs::temp_directory_path() / "bench_fleet_csv").string(), json_out;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_fleet: a fleet's load, data wait and backtest cost"};
  app.add_option("--series", a.series, "series in the fleet")->check(CLI::PositiveNumber);
  app.add_option("--rows", a.rows, "rows per series")->check(CLI::Range(int64_t{100}, int64_t{1} << 40));
  app.add_option("--threads", a.threads)->check(CLI::PositiveNumber);
  app.add_option("--folds", a.folds, "backtest folds")->check(CLI::PositiveNumber);
  app.add_option("--repeats", a.repeats)->check(CLI::PositiveNumber);
  app.add_option("--train-steps", a.train_steps, "training steps for the data-wait share")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--csv-dir", a.csv_dir, "where the glob's files are written once and reused");
  app.add_option("--json", a.json_out);
  bench::parse_flags(app, argc, argv);
  return a;
}

// The fleet run: the synthetic cells, or (csv) the same cells as one file each.
std::string fleet_yaml(const Args& a, const std::string& csv_glob) {
  const std::string source = csv_glob.empty()
                                 ? fmt::format("  source: synthetic\n  synthetic: {{rows: {}, cells: {}}}\n", a.rows,
                                               a.series)
                                 : fmt::format("  source: csv\n  path: {}\n", csv_glob);
  // Validation and test hold ~128 rows a series (two windows' worth): the data path is what is timed.
  const double f = std::max(0.01, 128.0 / static_cast<double>(a.rows));
  return "data:\n" + source +
         "  features: [voltage, current, temperature, soc]\n  targets: [voltage]\n  lookback: 48\n  horizon: 16\n" +
         fmt::format("  split: [{}, {}, {}]\n", 1 - 2 * f, f, f) + "  normalize_scope: series\n"
         "model: {type: lstm, hidden: 64}\ntrain: {batch_size: 256, epochs: 1, eval_every: \"0\", log_every: 50}\n";
}

Config config_of(const Args& a, const std::string& csv_glob, const std::vector<std::string>& sets = {}) {
  std::vector<std::string> all = sets;
  all.push_back("runtime.threads=" + std::to_string(a.threads));
  const std::string path = (fs::temp_directory_path() / ("bench_fleet_" + std::to_string(::getpid()) + ".yaml")).string();
  std::ofstream(path) << fleet_yaml(a, csv_glob);
  Config c = load_config(path, all);
  fs::remove(path);
  return c;
}

// The synthetic cells written as one CSV a cell (once: a directory holding them is reused).
std::string write_csvs(const Args& a) {
  const std::string glob = (fs::path(a.csv_dir) / "cell_*.csv").string();
  const std::string stamp = (fs::path(a.csv_dir) / fmt::format(".{}x{}", a.series, a.rows)).string();
  if (fs::exists(stamp)) return glob;
  fs::remove_all(a.csv_dir);
  fs::create_directories(a.csv_dir);
  SyntheticConfig sc;
  sc.rows = a.rows;
  sc.cells = a.series;
  const Series s = make_synthetic(sc);
  for (const SeriesSegment& p : s.segments) {
    std::string text = "voltage,current,temperature,soc\n";
    for (int64_t r = p.begin; r < p.end; ++r)
      text += fmt::format("{:.9g},{:.9g},{:.9g},{:.9g}\n", s.at(r, 0), s.at(r, 1), s.at(r, 2), s.at(r, 3));
    std::ofstream((fs::path(a.csv_dir) / (p.id + ".csv")).string()) << text;
  }
  std::ofstream(stamp) << "written\n";
  return glob;
}

// load_dataset's median wall time over the repeats (after one warm-up that also fills the page cache).
double load_ms(const Config& c, int repeats, int64_t* windows) {
  std::vector<double> ms;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = bench::Clock::now();
    const Dataset ds = load_dataset(c);
    if (r > 0) ms.push_back(bench::ms_since(t0));
    *windows = ds.train.size() + ds.val.size() + ds.test.size();
  }
  return bench::median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_cpu_threads(a.threads);
  json out = {{"series", a.series}, {"rows", a.rows}, {"threads", a.threads}, {"loadavg", bench::loadavg()}};

  // 1. Load, normalize, window.
  int64_t windows = 0;
  const Config synthetic = config_of(a, "");
  out["load_synthetic_ms"] = load_ms(synthetic, a.repeats, &windows);
  out["windows"] = windows;
  const std::string glob = write_csvs(a);
  const Config csv = config_of(a, glob);
  out["load_csv_glob_ms"] = load_ms(csv, a.repeats, &windows);
  std::fprintf(stderr, "bench_fleet: load synthetic %.0f ms, csv glob %.0f ms (%ld windows)\n",
               out["load_synthetic_ms"].get<double>(), out["load_csv_glob_ms"].get<double>(), (long)windows);

  // What a training batch costs to fill (the loader's work; on 2 cores it has no worker thread, so
  // this is its data wait): 256 shuffled windows of the 10M-row table, median of 200 batches.
  {
    const Dataset fleet = load_dataset(csv);
    const std::vector<int64_t> order = epoch_order(static_cast<size_t>(fleet.train.size()), true, 0, 0);
    std::vector<float> x(256 * fleet.train.x_size()), y(256 * fleet.train.y_size());
    std::vector<double> fill;
    for (int64_t b = 0; b < 200; ++b) {
      const auto t = bench::Clock::now();
      fleet.train.fill_batch(std::span<const int64_t>(order.data() + b * 256, 256), x.data(), y.data());
      fill.push_back(bench::ms_since(t));
    }
    out["batch_fill_ms"] = bench::median(fill);
  }

  // 2. Data wait while training on it (--train-steps 0: skipped).
  if (a.train_steps > 0) {
  const fs::path run = fs::temp_directory_path() / ("bench_fleet_run_" + std::to_string(::getpid()));
  const Config train_config = config_of(a, glob, {"train.max_steps=" + std::to_string(a.train_steps)});
  const auto t0 = bench::Clock::now();
  train(train_config, TrainOptions(run.string(), false, true, true));
  out["train_ms"] = bench::ms_since(t0);
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const json r = json::parse(line);
    if (r.contains("data_wait_share")) {
      out["data_wait_share_percent"] = 100.0 * r["data_wait_share"].get<double>();
      out["epoch_train_s"] = r["epoch_train_s"];
    }
  }
  fs::remove_all(run);
  }

  // 3. The backtest against one evaluation pass over the same windows.
  const Dataset ds = load_dataset(synthetic);
  std::unique_ptr<Model> model = build_model(model_spec(synthetic, ds));
  Rng rng(0);
  model->init(rng);
  const std::vector<std::string> ends = fold_ends(a.folds, 16, {}, 16);
  std::vector<RowRange> ranges;
  {
    const Backtest probe(synthetic, ds, ends, "--folds/--step");
    for (int64_t k = 0; k < a.folds; ++k)
      for (int64_t o : probe.origins(k)) ranges.push_back({o - 48, o + 16});
  }
  const WindowDataset same = ds.train.with_ranges(ranges, 1);
  LossOptions lo;
  lo.backend = &model->params().backend();
  const auto objective = make_objective(parse_loss(synthetic.train.loss), lo, ObjectiveTask::forecast);
  std::vector<double> eval_ms, scored_ms, backtest_ms, setup_ms;
  double checksum = 0;
  for (int r = 0; r <= a.repeats; ++r) {  // repeat 0 warms up
    auto t = bench::Clock::now();
    checksum += evaluate(*model, WindowSource(same), window_layout(same), *objective, synthetic.train.batch_size);
    const double e = bench::ms_since(t);
    // What `seqtrain eval` does with them: the same pass scored in units beside the baselines,
    // the scorer's setup (MASE scales over the training rows) included.
    t = bench::Clock::now();
    const ForecastScoring scoring = ForecastScoring::of(ds, synthetic.data.seasons);
    std::optional<ForecastScorer> scorer;
    const int64_t N = static_cast<int64_t>(ds.series.size());
    scorer.emplace(scoring, [N](int64_t w) { return w % N; });  // fold-major: window w is series w % N
    checksum += evaluate(*model, WindowSource(same), window_layout(same), *objective, synthetic.train.batch_size,
                         nullptr, scorer_hook(scorer));
    checksum += scorer->report(ds.fleet)["mae"].get<double>();  // per series on a fleet, as eval prints it
    const double se = bench::ms_since(t);
    t = bench::Clock::now();
    Backtest bt(synthetic, ds, ends, "--folds/--step");
    const double setup = bench::ms_since(t);
    bt.run(*model, ds, 0, a.folds, synthetic.train.batch_size);
    checksum += bt.report()["overall"]["mae"].get<double>();
    const double b = bench::ms_since(t);
    if (r > 0) eval_ms.push_back(e), scored_ms.push_back(se), backtest_ms.push_back(b), setup_ms.push_back(setup);
  }
  out["backtest_windows"] = same.size();
  out["evaluation_pass_ms"] = bench::median(eval_ms);
  out["backtest_ms"] = bench::median(backtest_ms);
  out["backtest_setup_ms"] = bench::median(setup_ms);  // origins and MASE scales, within backtest_ms
  out["scored_evaluation_pass_ms"] = bench::median(scored_ms);
  out["backtest_over_evaluation"] = bench::median(backtest_ms) / bench::median(eval_ms);
  out["backtest_over_scored_evaluation"] = bench::median(backtest_ms) / bench::median(scored_ms);
  out["checksum"] = checksum;
  std::printf("%s\n", out.dump(2).c_str());
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}
