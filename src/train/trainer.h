// Trainer: the `seqtrain train` job. Epochs over the training windows with validation inside
// every epoch, early stopping, metrics.jsonl, checkpoints best/last (and every
// checkpoint_every steps) written on a background thread from a snapshot, SIGINT/SIGTERM
// handling, resume from `last`, and a final test-split evaluation with the best weights.
#pragma once
#include <memory>
#include <string>

#include "config/config.h"
#include "data/dataset.h"
#include "models/model.h"

namespace seqtrain {

struct TrainOptions {
  std::string out_dir;
  bool resume = false;     // continue the run in out_dir from checkpoints/last
  bool overwrite = false;  // replace a run already in out_dir
  bool quiet = false;
};

struct TrainSummary {
  int64_t epochs = 0, steps = 0;
  double best_val = 0, test_loss = 0, baseline_val = 0;  // baseline: predict-last-value MSE
  std::string stopped_by;  // "epochs" | "max_steps" | "early_stopping" | "signal"
};

TrainSummary train(const Config& config, const TrainOptions& options);

// Model shape for a config and a dataset.
ModelSpec model_spec(const Config& config, const Dataset& data);

// Mean loss (in the normalized units) over every window of `split`.
double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size);

}  // namespace seqtrain
