// TensorBoardObserver: what `runtime.tensorboard: true` adds to a run. It writes the numbers of
// metrics.jsonl's train, data, val and test records as TensorBoard scalars (one event per
// record, at the record's step) to an events file in the run directory (obs/tensorboard.h), so
// `tensorboard --logdir runs/` shows every run under it. It takes the values the events carry,
// the same ones MetricsObserver writes, so both logs always agree. Tags:
//   train record:  train/loss, train/lr, train/grad_norm, train/samples_per_s,
//                  train/tokens_per_s (language models), train/loss_scale and
//                  train/skipped_steps (fp16), gpu/utilization, gpu/memory_used_mib,
//                  gpu/power_w (a GPU that NVML answers for)
//   data record:   train/data_wait_share
//   val and test:  <split>/loss, <split>/accuracy, <split>/baseline_last_value and every number
//                  of the forecast report under its JSON path: <split>/mae,
//                  <split>/baseline/last_value/mae, <split>/per_target/<target>/mae, ...
// Flushed at every evaluation, when a checkpoint takes its position, every 10 s of step
// records and at the end (fsynced then), so a crash loses at most the records of a few
// seconds. A write error (a full disk) warns once and ends TensorBoard logging, not the run.
//
// Resume: a checkpoint remembers the file and its length then (position()), as it remembers
// metrics.jsonl's; the resumed run cuts that file back to it (cut_events_files) and starts a new
// file whose first record after file_version is a SessionLog START at the checkpoint's step + 1.
// TensorBoard drops every point at START's step or later read before it, i.e. whatever an
// older file holds past the checkpoint; not the checkpoint's own step: its records stay in
// metrics.jsonl (they were written before the checkpoint), so they stay here too.
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "obs/tensorboard.h"
#include "train/observer.h"

namespace seqtrain {

class TensorBoardObserver final : public TrainObserver {
 public:
  // Creates the events file in `run_dir`; throws Error naming it and a fix when it cannot.
  // `start_step`: a resumed run's first step (checkpoint's step + 1), written as SessionLog START.
  TensorBoardObserver(const std::filesystem::path& run_dir, std::optional<int64_t> start_step);

  void on_step(const StepEvent& e) override;
  void on_epoch(const EpochEvent& e) override;
  void on_eval(const EvalEvent& e) override;
  void on_end(const EndEvent& e) override;

  // Flushes, then {"file": name in the run directory, "bytes": length}: what a checkpoint taken
  // now keeps in state.json (RunState::tensorboard). Null once logging has stopped on an error.
  nlohmann::json position();
  std::filesystem::path path() const { return path_; }

 private:
  template <typename F> void guarded(F&& write);
  void write(int64_t step, const std::vector<tensorboard::Scalar>& values);

  std::filesystem::path path_;
  std::unique_ptr<tensorboard::EventsFile> file_;  // null once logging stopped on an error
};

// On resume: cuts the events file a checkpoint's `position` names (in `run_dir`) back to its
// length then, dropping the records written after the checkpoint, which the resumed run writes
// again, and removes seqtrain's events files started after that one but `keep` (the resumed
// run's own): all they hold came after the checkpoint (a resume from an older checkpoint than
// the newest, whose run went on and crashed). A null position (TensorBoard off then, an older
// checkpoint) leaves every file alone, as does a missing or shorter file its cut.
void cut_events_files(const std::filesystem::path& run_dir, const nlohmann::json& position,
                      const std::filesystem::path& keep);

// A run that starts over (not a resume) leaves no curves of an earlier attempt behind, as it
// leaves no metrics.jsonl: seqtrain's events files in `run_dir` other than `keep` are removed.
// Other writers' events files are not seqtrain's to remove.
void remove_earlier_events_files(const std::filesystem::path& run_dir, const std::filesystem::path& keep);

}  // namespace seqtrain
