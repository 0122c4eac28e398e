// RunState: everything a checkpoint's state.json holds, and the only code that writes or reads
// that file's fields. Two halves: where the run stands (position, best metric, pending train
// losses, clock, lengths of metrics.jsonl and the TensorBoard events file), which a resume
// continues from; and what the run is (seed, threads, kernel level, config, data facts, model
// spec, component states), which a resume checks and `seqtrain eval/predict/generate` read.
// docs/CHECKPOINTS.md documents the fields; old checkpoints lacking newer fields still load
// (their defaults apply).
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace seqtrain {

struct RunState {
  // Where the run stands: a resume continues at batch `batch_in_epoch` of epoch `epoch`.
  std::string tag;
  int64_t epoch = 0, batch_in_epoch = 0;
  int64_t micro_steps = 0;  // micro-batches run (a partial accumulation is replayed on resume)
  int64_t updates = 0;      // optimizer steps taken, skipped fp16 steps included
  int64_t bad_validations = 0;
  // The best value of train.monitor so far, signed so that lower is better (val_accuracy is
  // stored negated), and the validation loss of that same validation.
  double best_val = std::numeric_limits<double>::infinity();
  double best_val_loss = std::numeric_limits<double>::infinity();
  double time_s = 0;
  // Train losses taken from the step but not yet logged, so a log record spanning a resume
  // still averages every batch.
  double pending_loss_sum = 0;
  int64_t pending_loss_count = 0;
  int64_t metrics_bytes = 0;  // metrics.jsonl's length at this checkpoint
  // runtime.tensorboard: {"file", "bytes"}, the events file and its length at this checkpoint
  // (train/tensorboard_observer.h); null when the run writes none.
  nlohmann::json tensorboard;

  // What the run is.
  uint64_t seed = 0;
  int64_t threads = 0;
  std::string cpu_isa;
  std::string config_hash, config_yaml;
  nlohmann::json normalizer, io, vocab, model_spec;
  std::vector<std::string> features, targets;
  nlohmann::json schedule, loss_scaler;  // each component's own state; loss_scaler null unless fp16

  nlohmann::json to_json() const;
  // Throws Error naming the missing or mistyped field.
  static RunState from_json(const nlohmann::json& j);
};

}  // namespace seqtrain
