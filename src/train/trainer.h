// Trainer: the `seqtrain train` job. Epochs over the training windows with validation inside
// every epoch, early stopping, metrics.jsonl, checkpoints (best, last, and step-<N> every
// train.checkpoint_every steps or each epoch, pruned to train.keep_last) written on a
// background thread from a snapshot, SIGINT/SIGTERM handling, resume from the newest whole
// checkpoint, and a final test-split evaluation with the best weights. docs/CHECKPOINTS.md
// describes the checkpoint and resume behaviour users rely on.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "models/model.h"
#include "train/data_plan.h"
#include "train/objective.h"

namespace seqtrain {

struct TrainOptions {
  std::string out_dir;
  bool resume = false;     // continue the run in out_dir from its newest checkpoint
  bool overwrite = false;  // replace a run already in out_dir
  bool quiet = false;
};

struct TrainSummary {
  int64_t epochs = 0, steps = 0;
  int64_t skipped_steps = 0;  // of `steps`, skipped by fp16 loss scaling (inf/NaN gradients)
  double best_val = 0;
  std::optional<double> test_loss;      // absent when the test split is empty (or on a signal)
  std::optional<double> test_accuracy;  // classification runs only
  std::optional<double> baseline_val;   // predict-last-value MSE; windowed forecasting only
  std::string stopped_by;  // "epochs" | "max_steps" | "early_stopping" | "signal"
  int signal = 0;          // the signal number when stopped_by == "signal"
  double checkpoint_block_s = 0;  // time the loop spent on checkpoints (snapshots + waits)
};

TrainSummary train(const Config& config, const TrainOptions& options);

// Makes SIGINT and SIGTERM stop a running train() cleanly: the current step finishes, `last`
// is written and train() returns with stopped_by "signal". A second signal, or one that
// arrives while no training runs, ends the process as usual. Call it at the top of main(),
// before any thread exists: it blocks both signals in the calling thread (new threads inherit
// that) and receives them on a watcher thread. Without it, train() does not catch signals.
void route_stop_signals();

// Model shape for a config and a dataset (csv/synthetic) or a data plan (any source).
ModelSpec model_spec(const Config& config, const Dataset& data);
ModelSpec model_spec(const Config& config, const DataPlan& plan);
ModelSpec model_spec(const Config& config, int64_t input_size, int64_t lookback, int64_t output_size);

// Mean loss (in the normalized units) over every window of `split`.
double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size);
// Runs `model` in inference mode over every sample of `source` (x [steps, features] each) in
// index order, batch_size at a time, and hands each batch to `use`: the index of its first
// sample, its size, the model's outputs and the samples' y (null when the source has none).
void forward_batches(Model& model, const BatchSource& source, int64_t steps, int64_t features, int64_t batch_size,
                     const std::function<void(int64_t first, int64_t n, const Tensor& pred, float* y)>& use);

// The objective's loss sum, count and metrics over every sample of `split` (x [steps,
// features] per sample), in index order.
ObjectiveSum evaluate_sum(Model& model, const BatchSource& split, int64_t steps, int64_t features,
                          const Objective& objective, int64_t batch_size);
// Its mean loss per counted target; *accuracy (when given) receives the share of counted
// labels whose largest logit is the label (0 for regression objectives).
double evaluate(Model& model, const BatchSource& split, int64_t steps, int64_t features, const Objective& objective,
                int64_t batch_size, double* accuracy = nullptr);

}  // namespace seqtrain
