// seqtrain command-line entry point: parses the command line with CLI11 and hands each
// command to its function in cli/commands.h. Every seqtrain::Error becomes one message on
// stderr and exit code 2; nothing escapes as a crash. SIGINT/SIGTERM during `train` stop it
// cleanly after the current step (exit code 128 + signal, `last` written).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "backend/cpu/isa.h"
#include "cli/commands.h"
#include "cli/export.h"
#include "cli/generate.h"
#include "core/error.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  using namespace seqtrain;
  route_stop_signals();  // first, before any thread starts (see its comment)
  CLI::App app{
      "seqtrain: fast, dependable training of sequence models (LSTM/GRU forecasters and classifiers, "
      "character LMs, GPT)"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version, git commit, build type, CPU kernel levels and CUDA plugin");

  TrainArgs train_args;
  auto* train = app.add_subcommand("train", "Train a model from a YAML config");
  train->add_option("config", train_args.config, "YAML config file")->check(CLI::ExistingFile);
  train->add_option("--set", train_args.overrides, "Override a config key: --set train.epochs=3 (repeatable)");
  train->add_option("--out", train_args.out, "Run directory (default runs/<config name>)");
  train->add_option("--resume", train_args.resume,
                    "Continue the run in this directory from its newest checkpoint (normally checkpoints/last); "
                    "--set may change only train.epochs, train.max_steps, train.early_stopping.patience, "
                    "runtime.threads");
  train->add_flag("--overwrite", train_args.overwrite, "Replace a run already in --out");
  train->add_option("--threads", train_args.threads, "Intra-op threads (default: runtime.threads, 0 = all cores)");
  train->add_flag("--quiet", train_args.quiet, "Print only errors");

  EvalArgs eval_args;
  auto* eval = app.add_subcommand("eval", "Evaluate a checkpoint (or a run directory's best) on its test split or a CSV");
  eval->add_option("checkpoint", eval_args.checkpoint, "checkpoints/<tag> directory or run directory")->required();
  eval->add_option("--input", eval_args.input,
                   "labelled data to evaluate on instead of the run's split: a CSV (csv/synthetic runs) or an X .npy "
                   "(npy runs, with --labels)");
  eval->add_option("--labels", eval_args.labels, "the y .npy of --input's X .npy (npy runs): labels [N] or targets");
  eval->add_option("--split", eval_args.split, "the run's split to evaluate: test (default) or val")
      ->check(CLI::IsMember({"test", "val"}));

  PredictArgs predict_args;
  auto* predict = app.add_subcommand("predict",
                                      "Write de-normalized forecasts for every window of a CSV (csv runs), or the "
                                      "outputs for every sample of an X .npy (npy runs)");
  predict->add_option("checkpoint", predict_args.checkpoint, "checkpoints/<tag> directory or run directory")->required();
  predict->add_option("--input", predict_args.input, "input CSV with the training columns, or X .npy [N, T, F]")
      ->required();
  predict->add_option("--output", predict_args.output,
                      "output .csv (csv runs: columns <target>_t+<h>; npy classifiers: label, prob_<c>, logit_<c>) or "
                      ".npy (npy runs: outputs or logits, and for classifiers <stem>.probs.npy and <stem>.labels.npy "
                      "beside it)")
      ->required();

  ForecastArgs forecast_args;
  auto* forecast = app.add_subcommand("forecast", "Forecast the horizon after the last row of a CSV history (csv and "
                                                  "synthetic runs), in the targets' units");
  forecast->add_option("checkpoint", forecast_args.checkpoint, "checkpoints/<tag> directory or run directory")->required();
  forecast->add_option("--input", forecast_args.input, "CSV history with the training columns; its last data.lookback "
                                                       "rows are read")->required();
  forecast->add_option("--output", forecast_args.output, "CSV to write (step, one column per target); default stdout");

  auto* data = app.add_subcommand("data", "Prepare and inspect training data (the pre-augmentation cache)");
  data->require_subcommand(1);
  DataCacheArgs cache_args;
  auto* cache = data->add_subcommand("cache", "Build the data.cache file of a config's training split without training");
  cache->add_option("config", cache_args.config, "YAML config file (data.cache must name a directory)")
      ->required()
      ->check(CLI::ExistingFile);
  cache->add_option("--set", cache_args.overrides, "Override a config key: --set data.cache=DIR (repeatable)");
  DataInfoArgs info_args;
  auto* info = data->add_subcommand("info", "List the data caches of a directory: key, epochs, samples, size, created, source");
  info->add_option("dir", info_args.dir, "cache directory (default: the current directory)");
  DataExportArgs export_data_args;
  auto* export_data = data->add_subcommand("export", "Write a csv or synthetic source as the CSV its run reads");
  export_data->add_option("config", export_data_args.config, "YAML config file")->required()->check(CLI::ExistingFile);
  export_data->add_option("--out", export_data_args.out, "CSV file to write (written whole or not at all)")->required();
  export_data->add_option("--set", export_data_args.overrides, "Override a config key (repeatable)");
  SummaryArgs summary_args;
  auto* summary = app.add_subcommand("summary", "Print the data and the model a config builds (layers, output "
                                                "shapes, parameters) without training");
  summary->add_option("config", summary_args.config, "YAML config file")->required()->check(CLI::ExistingFile);
  summary->add_option("--set", summary_args.overrides, "Override a config key (repeatable)");
  GenerateArgs generate_args;
  auto* generate = add_generate_command(app, generate_args);
  ExportArgs export_args;
  auto* exporter = add_export_command(app, export_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    active_isa();  // a bad SEQTRAIN_ISA is an error before any work starts
    if (version) return run_version();
    if (train->parsed()) return run_train(train_args);
    if (eval->parsed()) return run_eval(eval_args);
    if (predict->parsed()) return run_predict(predict_args);
    if (forecast->parsed()) return run_forecast(forecast_args);
    if (cache->parsed()) return run_data_cache(cache_args);
    if (info->parsed()) return run_data_info(info_args);
    if (export_data->parsed()) return run_data_export(export_data_args);
    if (summary->parsed()) return run_summary(summary_args);
    if (generate->parsed()) return run_generate(generate_args);
    if (exporter->parsed()) return run_export(export_args);
  } catch (const Error& e) {
    std::fprintf(stderr, "seqtrain: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "seqtrain: internal error: %s\n", e.what());
    return 3;
  }
  std::fprintf(stderr, "seqtrain: error: give a command (or --version)\n%s", app.help().c_str());
  return 2;
}
