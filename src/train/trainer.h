// Trainer: the `seqtrain train` job. Epochs over the training windows with validation inside
// every epoch, early stopping, metrics.jsonl, checkpoints (best, last, and step-<N> every
// train.checkpoint_every steps or each epoch, pruned to train.keep_last) written on a
// background thread from a snapshot, SIGINT/SIGTERM handling, resume from the newest whole
// checkpoint, and a final test-split evaluation with the best weights. docs/CHECKPOINTS.md
// describes the checkpoint and resume behaviour users rely on.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "models/model.h"
#include "models/registry.h"
#include "train/data_plan.h"
#include "train/forecast_scorer.h"
#include "train/objective.h"

namespace seqtrain {

class Communicator;
class StopToken;
class TrainObserver;

struct TrainOptions {
  TrainOptions() = default;
  explicit TrainOptions(std::string out, bool resume_run = false, bool overwrite_run = false, bool quiet_run = false)
      : out_dir(std::move(out)), resume(resume_run), overwrite(overwrite_run), quiet(quiet_run) {}

  std::string out_dir;
  bool resume = false;     // continue the run in out_dir from its newest checkpoint
  bool overwrite = false;  // replace a run already in out_dir
  bool quiet = false;
  // Stops the run after the current step with a resumable `last` (signal_stop_token() for the
  // CLI's signals; a library caller passes its own). Null: nothing can stop the run early.
  StopToken* stop = nullptr;
  // The ranks of a data-parallel run; null: this process alone (LocalCommunicator).
  Communicator* comm = nullptr;
  // Watch the run besides the metrics log and the console (primary rank only; not owned).
  std::vector<TrainObserver*> observers;
};

struct TrainSummary {
  int64_t epochs = 0, steps = 0;  // epochs completed (or begun, when stopped inside one), optimizer steps
  int64_t skipped_steps = 0;  // of `steps`, skipped by fp16 loss scaling (inf/NaN gradients)
  double best_val = 0;                  // the validation loss at the best checkpoint
  std::string monitor = "val_loss";     // train.monitor
  std::optional<double> best_monitored; // its best value, when it is not val_loss
  std::optional<double> test_loss;      // absent when the test split is empty (or on a signal)
  nlohmann::json test_forecast;         // forecasting runs: the test split's ForecastScorer report
  std::optional<double> test_accuracy;  // classification runs only
  std::optional<double> baseline_val;   // predict-last-value MSE; windowed forecasting only
  // "epochs" | "max_steps" | "early_stopping" | "signal" | "stop_token" (a library caller's)
  std::string stopped_by;
  int signal = 0;          // the signal number when stopped_by == "signal"
  double checkpoint_block_s = 0;  // time the loop spent on checkpoints (snapshots + waits)
  double time_s = 0;              // the run's training time, over every resume
};

TrainSummary train(const Config& config, const TrainOptions& options);

// Makes SIGINT and SIGTERM request a stop of signal_stop_token(): a train() given that token
// finishes the current step, writes `last` and returns with stopped_by "signal". A second
// signal, or one that arrives while no training watches the token, ends the process as usual.
// Call it at the top of main(), before any thread exists: it blocks both signals in the
// calling thread (new threads inherit that) and receives them on a watcher thread.
void route_stop_signals();
StopToken& signal_stop_token();

// Mean squared error of predicting every horizon step as the window's last observed target
// value: the bar a forecaster must clear to be worth anything (0 when a target is no input).
double last_value_baseline(const Dataset& data, const WindowDataset& split);

// What a csv/synthetic dataset gives a model: x [steps (lookback + known future), features],
// horizon x targets x quantile levels outputs, the targets' places among the inputs.
DataShape window_shape(const Config& config, const Dataset& data);
// Model shape for a config and a dataset (csv/synthetic) or a data plan (any source).
ModelSpec model_spec(const Config& config, const Dataset& data);
ModelSpec model_spec(const Config& config, const DataPlan& plan);
ModelSpec model_spec(const Config& config, int64_t input_size, int64_t lookback, int64_t output_size);

// Mean loss (in the normalized units) over every window of `split`.
double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size);
// Runs `model` in inference mode over every sample of `source` in index order, batch_size at a
// time, each batch built as `layout` says (data/batch_layout.h's fill_batch: lengths and the
// padding mask included), and hands each to `use`: the index of its first sample, the batch as
// the host holds it (x, y, count, lengths) and as the model read it (on its backend), and the
// model's outputs, the backend's memory in `arena` (the batch's, for anything `use` puts beside
// them: backend/device_batch.h).
using BatchUse = std::function<void(int64_t first, const Batch& host, const Batch& device, const Tensor& pred,
                                    Arena& arena)>;
// `pass` replaces model.forward when given (`seqtrain embed`: the model's embed).
using ModelPass = std::function<Tensor(const Batch& batch, StepContext& ctx)>;
// Which rows of every batch this process runs: a data-parallel evaluation's rank runs its shard of
// each batch (data/loader.h's shard_rows, as training does), whose samples keep their indices in
// the split, so a per-sample mask is the one-process run's. The default is the whole batch.
struct EvalShard {
  int rank = 0;
  int world = 1;
};
void forward_batches(Model& model, const BatchSource& source, const SampleLayout& layout, int64_t batch_size,
                     const BatchUse& use, const ModelPass& pass = {}, EvalShard shard = {});

// What an evaluation also hands each batch to, beside the objective: its size, host x and y,
// and the model's outputs copied to the host (a ForecastScorer's add).
using EvalHook = std::function<void(int64_t n, const float* x, const float* y, const float* pred)>;
// The hook that feeds `scorer` each batch (ForecastScorer::add); none without a scorer.
EvalHook scorer_hook(std::optional<ForecastScorer>& scorer);
// Which series each window of `split` is, for a ForecastScorer; empty for one series (or null).
SeriesOf series_of(const WindowDataset* split);

// The objective's loss sum, count and metrics over every sample of `split`, in index order; each
// batch also goes to `hook` when given.
// With a shard, the sum of this rank's rows only: the caller sums the ranks' (TrainLoop).
ObjectiveSum evaluate_sum(Model& model, const BatchSource& split, const SampleLayout& layout,
                          const Objective& objective, int64_t batch_size, const EvalHook& hook = {},
                          EvalShard shard = {});
// Its mean loss per counted target; *accuracy (when given) receives the share of counted
// labels whose largest logit is the label (0 for regression objectives).
double evaluate(Model& model, const BatchSource& split, const SampleLayout& layout, const Objective& objective,
                int64_t batch_size, double* accuracy = nullptr, const EvalHook& hook = {});

}  // namespace seqtrain
