// TrainObserver: what watches a training run without being part of it (Marian's
// TrainingObserver, Keras callbacks). The loop reports what happened, in order: notes
// (start-up facts), a step record every train.log_every updates, the end of each epoch's
// training pass, each evaluation, each checkpoint handed to the writer, and the end. The
// metrics log and the console are the first two observers (train/observers.h), TensorBoard
// (train/tensorboard_observer.h) the third; a trace or the training service plug in here
// without touching the loop. Observers run on the training thread and only on the primary
// rank, so they must be quick and may write.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend/gpu_monitor.h"
#include "train/trainer.h"

namespace seqtrain {

struct StepEvent {
  int64_t epoch = 0, updates = 0;
  double loss = 0, lr = 0, grad_norm = 0, samples_per_s = 0, time_s = 0;
  std::optional<double> tokens_per_s;  // language models: predicted tokens per second
  std::optional<double> eta_s;         // seconds left at the rate since the first step; none before
  std::optional<double> loss_scale;    // fp16 loss scaling only
  int64_t skipped_since_last = 0;      // fp16 steps skipped since the previous record
  std::optional<GpuSample> gpu;        // a CUDA run where NVML answers: the GPU at this record
  int64_t total_updates = 0;           // the run's planned updates (epochs x per epoch, or max_steps)
  double epoch_done = 0;               // the share of this epoch's batches done, 0..1
};

struct EpochEvent {  // an epoch's training pass ended (validation may follow)
  int64_t epoch = 0, updates = 0;
  double train_s = 0, data_wait_s = 0, time_s = 0;
  double data_wait_share = 0;          // data_wait_s / train_s: the share the loader held the step up
};

struct EvalEvent {
  std::string split;                   // "val" | "test"
  int64_t epoch = 0, updates = 0;
  double loss = 0, time_s = 0;
  std::optional<double> lr;            // val records carry the schedule's lr
  std::optional<double> accuracy;      // classification and language models
  std::optional<double> baseline;      // windowed forecasting: the last-value MSE
  // Forecasting runs: the errors in the targets' units beside the baselines' (ForecastScorer's
  // report); null otherwise.
  nlohmann::json forecast;
  std::string monitor = "val_loss";    // train.monitor
  double best = 0;                     // its best value including this one
};

struct CheckpointEvent {
  std::string tag;                     // best | last | step-<N>
  std::string dir;
  int64_t epoch = 0, updates = 0;      // where a resume from it continues
};

struct EndEvent {
  const TrainSummary* summary = nullptr;
  std::string run_dir;
  double time_s = 0;
  std::optional<double> loss_scale;    // fp16: the final scale
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_note(const std::string& /*text*/) {}     // start-up facts (quiet runs hide them)
  virtual void on_warning(const std::string& /*text*/) {}  // what a user must see even when quiet
  virtual void on_step(const StepEvent&) {}
  virtual void on_epoch(const EpochEvent&) {}
  virtual void on_eval(const EvalEvent&) {}
  virtual void on_checkpoint(const CheckpointEvent&) {}
  virtual void on_end(const EndEvent&) {}
};

}  // namespace seqtrain
