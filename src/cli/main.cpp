// seqtrain command-line entry point: parses the command line with CLI11 and hands each
// command to its function in cli/commands.h. Every seqtrain::Error becomes one message on
// stderr and exit code 2; nothing escapes as a crash. SIGINT/SIGTERM during `train` stop it
// cleanly after the current step (exit code 128 + signal, `last` written).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <cstdlib>
#include <string>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/isa.h"
#include "cli/backtest.h"
#include "cli/commands.h"
#include "cli/diagnose.h"
#include "cli/embed.h"
#include "cli/export.h"
#include "cli/find_lr.h"
#include "cli/generate.h"
#include "cli/report.h"
#include "cli/serve.h"
#include "core/error.h"
#include "dist/mpi_session.h"
#include "train/rank_start.h"
#include "train/trainer.h"

namespace {
using namespace seqtrain;

// "rank 2 of 4: " in a data-parallel run's messages, nothing in a single process's.
std::string rank_prefix() {
  if (!dist::MpiSession::active()) return {};
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  return fmt::format("rank {}{}: ", dist::job_rank(), world ? fmt::format(" of {}", world) : std::string());
}

// A subcommand and what runs it once parsed.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// Adds subcommand `name` of `parent`, its options added by `options` into an Args that lives as
// long as the returned runner.
template <typename Args>
Command command(CLI::App& parent, const char* name, const char* help, int (*run)(const Args&),
                const std::function<void(CLI::App&, Args&)>& options) {
  auto args = std::make_shared<Args>();
  CLI::App* app = parent.add_subcommand(name, help);
  options(*app, *args);
  return {app, [run, args] { return run(*args); }};
}

void add_training_commands(CLI::App& app, std::vector<Command>& out) {
  out.push_back(command<TrainArgs>(app, "train", "Train a model from a YAML config", run_train, [](CLI::App& c, TrainArgs& a) {
    c.add_option("config", a.config, "YAML config file")->check(CLI::ExistingFile);
    c.add_option("--set", a.overrides, "Override a config key: --set train.epochs=3 (repeatable)");
    c.add_option("--out", a.out, "Run directory (default runs/<config name>)");
    c.add_option("--resume", a.resume,
                 "Continue the run in this directory from its newest checkpoint (normally checkpoints/last); "
                 "--set may change only train.epochs, train.max_steps, train.early_stopping.patience and "
                 "runtime.threads, device, profile, tensorboard, memory_limit");
    c.add_flag("--overwrite", a.overwrite, "Replace a run already in --out");
    c.add_option("--threads", a.threads, "Intra-op threads (default: runtime.threads, 0 = all cores)");
    c.add_flag("--quiet", a.quiet, "Print only errors");
    c.add_flag("--profile{20}", a.profile,
               "Trace 20 steps (--profile=N: N), from the 6th, into RUN/trace.json for Perfetto or "
               "chrome://tracing, and print the spans that took the most time (runtime.profile)");
  }));
  out.push_back(command<SummaryArgs>(
      app, "summary", "Print the data and the model a config builds (layers, output shapes, parameters) without training",
      run_summary, [](CLI::App& c, SummaryArgs& a) {
        c.add_option("config", a.config, "YAML config file")->required()->check(CLI::ExistingFile);
        c.add_option("--set", a.overrides, "Override a config key (repeatable)");
      }));
  auto find_lr = std::make_shared<FindLrArgs>();
  out.push_back({add_find_lr_command(app, *find_lr), [find_lr] { return run_find_lr(*find_lr); }});
}

// What a run will meet before it starts, and how runs compared after (src/obs/).
void add_observability_commands(CLI::App& app, std::vector<Command>& out) {
  auto diagnose = std::make_shared<DiagnoseArgs>();
  out.push_back({add_diagnose_command(app, *diagnose), [diagnose] { return run_diagnose(*diagnose); }});
  auto report = std::make_shared<ReportArgs>();
  out.push_back({add_report_command(app, *report), [report] { return run_report(*report); }});
}

void add_inference_commands(CLI::App& app, std::vector<Command>& out) {
  const char* checkpoint = "checkpoints/<tag> directory or run directory";
  out.push_back(command<EvalArgs>(
      app, "eval", "Evaluate a checkpoint (or a run directory's best) on its test split or a CSV", run_eval,
      [&](CLI::App& c, EvalArgs& a) {
        c.add_option("checkpoint", a.checkpoint, checkpoint)->required();
        c.add_option("--input", a.input,
                     "labelled data to evaluate on instead of the run's split: a CSV (csv/synthetic runs) or an X .npy "
                     "(npy runs, with --labels)");
        c.add_option("--labels", a.labels, "the y .npy of --input's X .npy (npy runs): labels [N] or targets");
        c.add_option("--lengths", a.lengths, "each sample's valid steps [N] for --input's X .npy (runs trained with "
                     "data.npy.train_len)");
        c.add_option("--split", a.split, "the run's split to evaluate: test (default) or val")
            ->check(CLI::IsMember({"test", "val"}));
      }));
  out.push_back(command<PredictArgs>(
      app, "predict",
      "Write de-normalized forecasts for every window of a CSV (csv runs), or the outputs for every sample of an X "
      ".npy (npy runs)",
      run_predict, [&](CLI::App& c, PredictArgs& a) {
        c.add_option("checkpoint", a.checkpoint, checkpoint)->required();
        c.add_option("--input", a.input, "input CSV with the training columns, or X .npy [N, T, F]")->required();
        c.add_option("--lengths", a.lengths, "each sample's valid steps [N] for an X .npy --input (runs trained with "
                     "data.npy.train_len)");
        c.add_option("--output", a.output,
                     "output .csv (csv runs: columns <target>_t+<h>; npy classifiers: label, prob_<c>, logit_<c>) or "
                     ".npy (npy runs: outputs or logits, and for classifiers <stem>.probs.npy and <stem>.labels.npy "
                     "beside it)")
            ->required();
        c.add_option("--plot", a.plot,
                     "csv runs: also draw each series' last forecast (history, actual, forecast, quantile band) as "
                     "this SVG");
        c.add_option("--series", a.series, "the series --plot draws (default: the first 4 of a fleet)");
        c.add_option("--unit", a.units, "a target's unit for the plot's axis: TARGET=UNIT (repeatable)");
      }));
  out.push_back(command<ForecastArgs>(
      app, "forecast",
      "Forecast the horizon after the last row of a CSV history (csv and synthetic runs), in the targets' units",
      run_forecast, [&](CLI::App& c, ForecastArgs& a) {
        c.add_option("checkpoint", a.checkpoint, checkpoint)->required();
        c.add_option("--input", a.input, "CSV history with the training columns; its last data.lookback rows are read")
            ->required();
        c.add_option("--future", a.future,
                     "CSV of the known-future inputs (data.future_features) for the forecast's steps, one row each")
            ->check(CLI::ExistingFile);
        c.add_option("--output", a.output, "CSV to write (step, one column per target); default stdout");
      }));
  auto backtest = std::make_shared<BacktestArgs>();
  out.push_back({add_backtest_command(app, *backtest), [backtest] { return run_backtest(*backtest); }});
  auto generate = std::make_shared<GenerateArgs>();
  out.push_back({add_generate_command(app, *generate), [generate] { return run_generate(*generate); }});
  auto exporter = std::make_shared<ExportArgs>();
  out.push_back({add_export_command(app, *exporter), [exporter] { return run_export(*exporter); }});
  auto embed = std::make_shared<EmbedArgs>();
  out.push_back({add_embed_command(app, *embed), [embed] { return run_embed(*embed); }});
  auto serve = std::make_shared<ServeArgs>();
  out.push_back({add_serve_command(app, *serve), [serve] { return run_serve(*serve); }});
}

void add_data_commands(CLI::App& app, std::vector<Command>& out) {
  CLI::App* data = app.add_subcommand("data", "Prepare and inspect training data (the pre-augmentation cache)");
  data->require_subcommand(1);
  out.push_back(command<DataCacheArgs>(
      *data, "cache", "Build the data.cache file of a config's training split without training", run_data_cache,
      [](CLI::App& c, DataCacheArgs& a) {
        c.add_option("config", a.config, "YAML config file (data.cache must name a directory)")
            ->required()
            ->check(CLI::ExistingFile);
        c.add_option("--set", a.overrides, "Override a config key: --set data.cache=DIR (repeatable)");
      }));
  out.push_back(command<DataInfoArgs>(
      *data, "info", "List the data caches of a directory: key, epochs, samples, size, created, source", run_data_info,
      [](CLI::App& c, DataInfoArgs& a) { c.add_option("dir", a.dir, "cache directory (default: the current directory)"); }));
  out.push_back(command<DataExportArgs>(
      *data, "export", "Write a csv or synthetic source as the CSV its run reads", run_data_export,
      [](CLI::App& c, DataExportArgs& a) {
        c.add_option("config", a.config, "YAML config file")->required()->check(CLI::ExistingFile);
        c.add_option("--out", a.out, "CSV file to write (written whole or not at all)")->required();
        c.add_option("--set", a.overrides, "Override a config key (repeatable)");
      }));
  out.push_back(command<DataSetsArgs>(
      *data, "sets",
      "Write the synthetic set-classification task (sets of 20-300 feature vectors labelled by which marker taxa "
      "they hold) as npy {train,val,test}_{x,y,len}.npy",
      run_data_sets, [](CLI::App& c, DataSetsArgs& a) {
        c.add_option("--out", a.out, "directory to write the nine .npy files into (all of them or none)")->required();
        c.add_option("--samples", a.samples, "training sets (validation and test get a fifth each)")
            ->check(CLI::Range(int64_t{10}, int64_t{1000000}));
        c.add_option("--seed", a.seed, "seed of the taxa and the draws");
      }));
  out.push_back(command<DataWindowsArgs>(
      *data, "windows",
      "Write synthetic price windows (105 bars x open, high, low, close) for masked pretraining and fine-tuning, as "
      "npy unlabelled_x.npy and {train,val,test}_{x,y}.npy",
      run_data_windows, [](CLI::App& c, DataWindowsArgs& a) {
        c.add_option("--out", a.out, "directory to write the seven .npy files into (all of them or none)")->required();
        c.add_option("--unlabelled", a.unlabelled, "unlabelled windows (for pretraining)")
            ->check(CLI::Range(int64_t{10}, int64_t{10000000}));
        c.add_option("--labelled", a.labelled, "labelled training windows (validation gets half as many, test twice)")
            ->check(CLI::Range(int64_t{10}, int64_t{1000000}));
        c.add_option("--seed", a.seed, "seed of the draws");
      }));
}
}  // namespace

int main(int argc, char** argv) {
  route_stop_signals();  // first, before any thread starts (see its comment)
  // Under mpirun, MPI for the whole process (its threads start after the signal mask is set);
  // otherwise nothing (docs/DISTRIBUTED.md).
  dist::MpiSession mpi;
  CLI::App app{
      "seqtrain: fast, dependable training of sequence models (LSTM/GRU forecasters and classifiers, "
      "character LMs, GPT)"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version, git commit, build type, CPU kernel levels and CUDA plugin");
  std::vector<Command> commands;
  add_training_commands(app, commands);
  add_observability_commands(app, commands);
  add_inference_commands(app, commands);
  add_data_commands(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    active_isa();  // a bad SEQTRAIN_ISA is an error before any work starts
    if (version) return run_version();
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const RankAgreedError& e) {
    // Every rank of a data-parallel run knows this one (train/rank_start.h): rank 0 says it, and
    // every rank exits non-zero in order.
    if (dist::job_rank() == 0) std::fprintf(stderr, "seqtrain: error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "seqtrain: error: %s%s\n", rank_prefix().c_str(), e.what());
    dist::abort_job(2);  // the other ranks of a data-parallel run must not wait for this one
    return 2;
  } catch (const std::bad_alloc&) {
    // Bad input more often than a bug: a model, batch or vocabulary sized beyond this machine.
    std::fprintf(stderr,
                 "seqtrain: error: %sout of memory: the model, a batch or the data is larger than this machine can "
                 "allocate; make it smaller (model.hidden, model.layers, model.embed_size, train.batch_size, "
                 "data.npy.classes), or see what it needs with `seqtrain diagnose CONFIG`\n",
                 rank_prefix().c_str());
    dist::abort_job(2);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqtrain: internal error: %s%s\n", rank_prefix().c_str(), e.what());
    dist::abort_job(3);
    return 3;
  }
  std::fprintf(stderr, "seqtrain: error: give a command (or --version)\n%s", app.help().c_str());
  return 2;
}
