// TrainLoop: the `seqtrain train` job, the one loop every model family, objective, device and
// rank runs. run() reads top to bottom; everything else is a step it names:
//   resume or start -> for each epoch: train its batches (logging, periodic checkpoints,
//   evaluations counted in updates) -> end the epoch (evaluations and checkpoints counted in
//   epochs) -> finish (test evaluation with the best weights, the end event).
// With train.ema_decay the weights validated, checkpointed and tested are their moving average
// (optim/ema.h); training steps the weights themselves.
// What the loop reports goes to observers (train/observer.h); where the run stands lives in
// one RunState (train/run_state.h), the only reader and writer of state.json; gradients are
// reduced across ranks by the Communicator inside TrainStep, and only the primary rank writes
// the run directory. A StopToken in TrainOptions ends the run after the current step with a
// resumable `last` checkpoint.
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "config/frequency.h"
#include "core/trace.h"
#include "data/loader.h"
#include "optim/ema.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/communicator.h"
#include "train/data_plan.h"
#include "train/forecast_scorer.h"
#include "train/group_schedule.h"
#include "train/objective.h"
#include "train/observers.h"
#include "train/resume.h"
#include "train/run_dir.h"
#include "train/run_state.h"
#include "train/step.h"
#include "train/stop_token.h"
#include "train/tensorboard_observer.h"
#include "train/trainer.h"

namespace seqtrain {

// What time_steps() measured of a job: `seqtrain diagnose`'s step time and memory.
struct StepTiming {
  int threads = 0;                   // compute threads
  int64_t workers = 0;               // loader threads, and why that many
  std::string workers_reason;
  int64_t batches_per_epoch = 0;     // training batches an epoch (micro-batches)
  int64_t updates_per_epoch = 0;     // optimizer steps an epoch
  int64_t total_updates = 0;         // the run's optimizer steps (train.epochs, train.max_steps)
  int64_t val_batches = 0;           // batches of one validation pass (train.eval_iters applied)
  int64_t test_batches = 0;          // batches of the final test pass
  int64_t train_samples = 0;         // training samples an epoch
  int64_t parameters = 0;
  int64_t warmup_batches = 0;
  double warmup_s = 0;               // the untimed first batches (arena sizing, autotune)
  int64_t timed_batches = 0, timed_samples = 0;
  double timed_s = 0;                // the timed batches, loader waits included
  double data_wait_s = 0;            // of which waiting for the loader
  double eval_batch_s = 0;           // seconds a validation batch (0: none timed)
  size_t activation_bytes = 0;       // the step's arena high water plus layer scratch
  std::string backend;               // where it ran: "cpu", "cuda:0", ...
};

class TrainLoop {
 public:
  // Reads the data, builds the model and its optimizer; fails on bad input before the run
  // directory is touched.
  TrainLoop(const Config& config, const TrainOptions& options);
  TrainSummary run();
  // Instead of run(): `warmup` untimed training batches, then `steps` timed ones, drawn from the
  // loader and stepped exactly as run() does, then one validation pass of at most
  // `eval_batches` batches, timed. Opens no run directory and writes nothing (the trained
  // weights are thrown away with the loop): what `seqtrain diagnose` measures a job by.
  StepTiming time_steps(int64_t warmup, int64_t steps, int64_t eval_batches);

 private:
  using Clock = std::chrono::steady_clock;
  void plan_model();          // the spec, precision and kernel tuner the model is built with
  void resolve_batch_size();  // train.batch_size: auto -> a number (train/batch_finder.h)
  void build_model();
  void build_optimizer();
  void make_loader();
  void open_run_dir();
  void resume_or_start();
  void resume_from(const std::vector<ResumeCandidate>& candidates);
  // The primary's checkpoint on every other rank (collective): the weights, the optimizer state
  // and state.json, so only the primary reads the run directory (no shared filesystem needed).
  void share_resume_state(nlohmann::json& st, std::string& dir, OptimizerState& os);
  void open_logs();
  void replay_partial_accumulation();
  void announce();
  bool train_epoch();  // false when a stop request ended it
  void after_update(const StepResult& r);
  bool end_epoch();    // false when a stop request arrived during it
  void validate();
  EvalEvent eval_event(const std::string& split, double loss) const;
  void checkpoint(const std::string& tag, int64_t next_epoch, int64_t next_batch, bool periodic);
  TrainSummary finish();
  void test_evaluation();
  void check_stop();
  bool stop_requested() const;
  void save_autotune_log();
  StepResult run_batch(const Batch& batch, int64_t micro);
  RunState state_at(const std::string& tag, int64_t next_epoch, int64_t next_batch);
  void refuse_finished_run(const std::string& checkpoint) const;
  void write_summary_json();
  // The mean train loss since the last record over every rank; *samples (this rank's samples
  // trained since then) becomes every rank's.
  double take_logged_loss(double* samples = nullptr);
  void hold_losses();
  void check_finite_loss(double loss, int64_t updates) const;
  double time_s() const;
  bool primary() const { return comm_->primary(); }

  // The caller's config with train.batch_size: auto resolved to the batch this run trains with:
  // what config.yaml, every checkpoint and the loop itself read.
  Config config_;
  TrainOptions opt_;
  std::filesystem::path run_, ckpt_dir_;
  LocalCommunicator local_comm_;
  Communicator* comm_;
  StopToken own_stop_;
  StopToken* stop_;
  int stop_signal_ = 0;  // the agreed signal of a stop by signal
  int threads_ = 0;
  DataPlan plan_;
  int64_t workers_ = 0;
  std::string workers_reason_;
  TrainFeed feed_;
  ModelSpec spec_;
  // runtime.precision resolved once (backend/precision.h): lent to the model, and it decides the
  // loss scaler; precision_why_ is the log's line about it.
  Precision precision_;
  std::string precision_why_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  // train.ema_decay: the weights' moving average, updated after each optimizer step (run_batch)
  // and swapped in for validation and checkpoints; null when off.
  std::unique_ptr<Ema> ema_;
  std::unique_ptr<GroupSchedule> groups_;  // the parameter groups of each epoch (fine-tuning)
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<Objective> objective_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<Loader> loader_;
  std::unique_ptr<RunLock> lock_;
  CheckpointWriter writer_;
  ConsoleObserver console_;
  std::unique_ptr<MetricsObserver> metrics_;
  std::unique_ptr<TensorBoardObserver> tensorboard_;  // runtime.tensorboard; null when off
  std::unique_ptr<GpuMonitor> gpu_;  // a CUDA run's NVML sampler for the step records; null on the CPU
  ObserverList observers_;
  Frequency eval_every_, checkpoint_every_;

  RunState state_;
  bool resuming_ = false;
  std::string resumed_from_;     // the step checkpoint a resumed run started from: never pruned
  int64_t batches_ = 0, total_updates_ = 0;
  // The kernel tuner lent to the model (runtime.autotune): its decisions are cached in the run
  // directory and logged by this loop. Null without autotune.
  std::shared_ptr<Autotuner> tuner_;
  bool autotune_saved_ = true;
  // runtime.profile's window: micro-batches [profile_from_, profile_to_) of this process.
  static constexpr int64_t kProfileSkip = 5;
  trace::Window profile_;
  int64_t profile_from_ = -1, profile_to_ = -1;
  void end_profile();
  bool last_is_current_ = false;  // `last` already holds the present state (no step since)
  TrainSummary summary_;
  Clock::time_point start_, log_start_, epoch_start_;
  int64_t log_samples_ = 0;
  // Where the ETA's rate is measured from: the first optimizer step of this process (which
  // autotunes and warms up, so it is left out); -1 until it has run.
  int64_t eta_from_updates_ = -1;
  double eta_from_s_ = 0;
  std::unique_ptr<BatchSource> val_capped_;  // the val split cut to train.eval_iters batches
  // Forecasting runs: how val and test forecasts are scored in the targets' units (fixed for
  // the run: the MASE scales come from the training rows); empty for other tasks.
  std::optional<ForecastScoring> scoring_;
  // `windows`: the split's windows when the run cuts them from series (a fleet's are scored each in
  // its series' units), else null.
  double evaluate_split(const BatchSource& split, const WindowDataset* windows, double* accuracy,
                        nlohmann::json* forecast);
  // train.monitor's value of a validation, signed so that lower is better (val_accuracy negated).
  double monitored(double loss, double accuracy, const nlohmann::json& forecast) const;
  BatchBuffers replay_buffers_;  // one micro-batch outside the loader (the resume replay)
};

}  // namespace seqtrain
