// `seqtrain find-lr`: the LR range test from the command line. See find_lr.h.
#include "cli/find_lr.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>

#include "cli/lr_plot.h"
#include "config/config.h"
#include "core/error.h"
#include "io/atomic_dir.h"
#include "train/lr_finder.h"

namespace seqtrain {
namespace fs = std::filesystem;

CLI::App* add_find_lr_command(CLI::App& app, FindLrArgs& a) {
  auto* c = app.add_subcommand("find-lr",
                               "LR range test: train a fresh model while the learning rate grows from --start to --end, "
                               "print the losses and a suggested train.optimizer.lr, write a CSV and an SVG plot");
  c->add_option("config", a.config, "YAML config file")->required()->check(CLI::ExistingFile);
  c->add_option("--set", a.overrides, "Override a config key: --set train.batch_size=128 (repeatable)");
  c->add_option("--start", a.start, "The first learning rate (default 1e-7)");
  c->add_option("--end", a.end, "The last learning rate (default 10)");
  c->add_option("--steps", a.steps, "Optimizer steps from --start to --end (default 100)");
  c->add_option("--out", a.out, "Directory for lr_find.csv and lr_find.svg (default find_lr/<config name>)");
  return c;
}

int run_find_lr(const FindLrArgs& a) {
  const LrFinderOptions options{.start = a.start, .end = a.end, .steps = a.steps};
  check_lr_finder_options(options);
  const fs::path out = a.out.empty() ? fs::path("find_lr") / fs::path(a.config).stem() : fs::path(a.out);
  // Its own directory only: a run's files are never overwritten, nor do its new files land in one.
  ST_CHECK(!fs::exists(out / "config.yaml") && !fs::exists(out / "checkpoints"),
           "--out {} holds a training run; find-lr writes only its own lr_find.csv and lr_find.svg: give another "
           "--out (the default is find_lr/<config name>)", out.string());
  const Config config = load_config(a.config, a.overrides);
  const LrFinderResult r =
      find_lr(config, options, [](const std::string& line) { std::fprintf(stderr, "seqtrain: %s\n", line.c_str()); });

  std::printf("find-lr: %zu of %ld steps from lr %.3g to %.3g at batch %ld; ended: %s\n", r.points.size(),
              (long)options.steps, options.start, options.end, (long)r.batch_size, r.stopped.c_str());
  std::printf("%12s %12s %12s\n", "lr", "loss", "smoothed");
  for (const LrPoint& p : r.points) std::printf("%12.4e %12.6g %12.6g\n", p.lr, p.loss, p.smoothed);
  const LrPoint& m = r.points[r.min_index];
  std::printf("suggested lr: %.3g (%s); the smoothed loss is smallest, %.6g, at lr %.3g\n", r.suggestion,
              r.rule.c_str(), m.smoothed, m.lr);
  std::printf("try it: --set train.optimizer.lr=%.3g\n", r.suggestion);

  std::error_code ec;
  fs::create_directories(out, ec);
  ST_CHECK(!ec, "cannot create --out {}: {}", out.string(), ec.message());
  const std::string csv = (out / "lr_find.csv").string(), svg = (out / "lr_find.svg").string();
  write_file_atomic(csv, lr_finder_csv(r));
  write_file_atomic(svg, lr_plot_svg(r, fs::path(a.config).filename().string()));
  std::printf("wrote %s and %s\n", csv.c_str(), svg.c_str());
  return 0;
}

}  // namespace seqtrain
