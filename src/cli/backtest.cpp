// `seqtrain backtest`: rolling-origin evaluation of a forecasting run. See backtest.h.
#include "cli/backtest.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "cli/inputs.h"
#include "cli/plot_panels.h"
#include "core/error.h"
#include "io/atomic_dir.h"
#include "train/backtest.h"
#include "train/load_model.h"
#include "train/trainer.h"

namespace seqtrain {
namespace fs = std::filesystem;

CLI::App* add_backtest_command(CLI::App& app, BacktestArgs& a) {
  auto* c = app.add_subcommand(
      "backtest", "Rolling-origin evaluation: forecast the horizon after each of several origins of a CSV, scored in "
                  "the targets' units beside the baselines (csv and synthetic runs)");
  c->add_option("checkpoint", a.checkpoint, "run directory (its best checkpoint) or checkpoints/<tag> directory")
      ->required();
  c->add_option("--input", a.input, "CSV (or glob of CSVs) with the run's columns, the actual values after every origin")
      ->required();
  auto* folds = c->add_option("--folds", a.folds, "origins, the last data.horizon rows before each series' end (default 5)")
                    ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  auto* step = c->add_option("--step", a.step, "rows between the folds' origins (default data.horizon)")
                   ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  c->add_option("--origins", a.origins,
                "origins instead: each series' first forecast row (a row number) or a date, comma-separated")
      ->delimiter(',')
      ->excludes(folds)
      ->excludes(step);
  c->add_flag("--refit", a.refit,
              "train a model on the rows before each origin (the run's config with data.end there) instead of applying "
              "the run's model");
  c->add_option("--out", a.out, "directory to write (default RUN/backtest); replaced whole");
  c->add_option("--plot", a.plot, "also draw the folds' forecasts against the actual values as this SVG");
  c->add_option("--series", a.series, "the series the plot shows (default: the first 4 of a fleet)");
  c->add_option("--unit", a.units, "a target's unit for the plot's axis: TARGET=UNIT (repeatable)");
  c->add_flag("--quiet", a.quiet, "print only the overall line");
  return c;
}

namespace {

// The fold's line: the model's errors beside the baselines'.
std::string fold_line(const std::string& what, const nlohmann::json& r) {
  auto num = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) && j[k].is_number() ? fmt::format("{:.6g}", j[k].get<double>()) : std::string("n/a");
  };
  std::string line = fmt::format("{}: mae {}, rmse {}, smape {}, mase {}", what, num(r, "mae"), num(r, "rmse"),
                                 num(r, "smape"), num(r, "mase"));
  if (r.contains("coverage")) line += ", coverage " + num(r, "coverage");
  if (r.contains("baseline"))
    for (const auto& [name, b] : r["baseline"].items()) line += fmt::format("; {} mae {}", name, num(b, "mae"));
  return line;
}

// Fold k's refit: the run's config on --input's rows before the fold's origin (data.end), its
// run in dir; then its model over --input scaled with its own statistics.
void refit_fold(const CheckpointRef& ck, const BacktestArgs& a, Backtest& bt, int64_t k, const std::string& dir) {
  Config cfg = ck.config;
  cfg.data = input_data(ck.config.data, a.input);
  cfg.data.split = ck.config.data.split;
  cfg.data.end = bt.end(k);
  TrainOptions opt(dir, false, true, true);
  opt.stop = &signal_stop_token();
  TrainSummary s;
  try {
    s = train(cfg, opt);
  } catch (const Error& e) {
    fail("--refit: fold {} (data.end {}: the rows before its origin): {}", k, bt.end(k), e.what());
  }
  ST_CHECK(s.stopped_by != "signal", "--refit: stopped by a signal while training fold {}; nothing was written", k);
  const CheckpointRef fk = open_checkpoint(dir);
  Config input = ck.config;
  input.data = input_data(ck.config.data, a.input);
  const Normalizer norm = Normalizer::from_json(fk.state.at("normalizer"));
  const Dataset scaled = load_dataset(input, &norm);
  auto model = load_model(fk.dir, {.shape = window_shape(input, scaled)}).model;
  bt.run(*model, scaled, k, k + 1, input.train.batch_size);
  if (!a.quiet)
    std::printf("fold %ld: trained on the rows before its origin (data.end %s) in %ld epochs, best val loss %.6g\n",
                (long)k, bt.end(k).c_str(), (long)s.epochs, s.best_val);
}

// The plot: for each series shown and each target, the history before the first origin, the
// actual values and every fold's forecast with its bands; run_data names the units (the run's
// own source: the synthetic cell's).
std::string backtest_plot(const Backtest& bt, const Config& config, const DataConfig& run_data,
                          const BacktestArgs& a) {
  const Dataset& data = bt.data();
  const std::vector<double>& quantiles = bt.scoring().quantiles;
  std::vector<PlotPanel> panels;
  for (int64_t k : plotted_series(data, a.series))
    for (int64_t t = 0; t < data.n_targets(); ++t) {
      std::vector<DrawnForecast> drawn;
      for (int64_t f = 0; f < bt.folds(); ++f) {
        Backtest::Forecast fc = bt.forecast(f, k, t);
        drawn.push_back({fc.origin, f, fc.point, fc.levels});
      }
      panels.push_back(forecast_panel(data, run_data, k, t, drawn, quantiles, 2 * config.data.lookback, a.units));
    }
  return forecast_svg(panels, plot_options(data, fmt::format("backtest of {}: {} folds on {}", a.checkpoint,
                                                             bt.folds(), fs::path(a.input).filename().string())));
}

}  // namespace

int run_backtest(const BacktestArgs& a) {
  const CheckpointRef ck = open_checkpoint(a.checkpoint);
  ST_CHECK(windowed(ck.config),
           "backtest forecasts the horizon after origins of a series, but this run reads data.source '{}': use "
           "`seqtrain eval` for its test split", ck.config.data.source);
  check_input_format(a.input, ".csv", "a CSV with the run's columns");
  ST_CHECK(a.plot.empty() || ends_with_text(a.plot, ".svg"), "--plot {}: the plot is an SVG; give a path ending in .svg",
           a.plot);
  std::string out = a.out;
  if (out.empty()) {
    ST_CHECK(fs::exists(fs::path(a.checkpoint) / "config.yaml"),
             "{} is a checkpoint directory, not a run directory: give --out DIR for the backtest's files", a.checkpoint);
    out = (fs::path(a.checkpoint) / "backtest").string();
  }
  out = fs::absolute(out).lexically_normal().string();  // publish_dir syncs its parent directory
  Loaded l = load_for_inference(ck, a.input);
  const int64_t H = l.config.data.horizon;
  const std::vector<std::string> ends =
      fold_ends(a.folds ? a.folds : 5, a.step ? a.step : H, a.origins, H);
  Backtest bt(l.config, l.data, ends, a.origins.empty() ? "--folds/--step" : "--origins");
  if (!a.series.empty()) plotted_series(l.data, a.series);  // a bad --series before any work
  // Everything is made in OUT.tmp and published whole; a failure removes it.
  const std::string tmp = out + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    if (!a.refit) {
      bt.run(*l.model, l.data, 0, bt.folds(), l.config.train.batch_size);
    } else {
      for (int64_t k = 0; k < bt.folds(); ++k)
        refit_fold(ck, a, bt, k, (fs::path(tmp) / "refit" / fmt::format("fold_{}", k)).string());
    }
    const nlohmann::json report = bt.report();
    nlohmann::json meta = report;
    meta["run"] = ck.dir;
    meta["input"] = a.input;
    meta["refit"] = a.refit;
    write_file_atomic((fs::path(tmp) / "backtest.json").string(), meta.dump(2) + "\n");
    write_file_atomic((fs::path(tmp) / "backtest.csv").string(), bt.metrics_csv(report));
    write_file_atomic((fs::path(tmp) / "predictions.csv").string(), bt.predictions_csv());
    const std::string svg = a.plot.empty() ? "" : backtest_plot(bt, l.config, ck.config.data, a);
    publish_dir(tmp, out);
    if (!a.plot.empty()) write_file_atomic(a.plot, svg);
    if (!a.quiet)
      for (const auto& f : report["folds"])
        std::printf("%s\n", fold_line(fmt::format("fold {} (end {})", f["fold"].get<int64_t>(),
                                                  f["end"].get<std::string>()), f["metrics"]).c_str());
    std::printf("%s\n", fold_line(fmt::format("overall ({} folds x {} series)", bt.folds(), l.data.series.size()),
                                  report["overall"]).c_str());
    std::printf("wrote backtest.csv, backtest.json and predictions.csv to %s%s\n", out.c_str(),
                a.plot.empty() ? "" : (" and the plot to " + a.plot).c_str());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return 0;
}

}  // namespace seqtrain
