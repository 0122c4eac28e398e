// StepGraphs: runtime.cuda_graphs for TrainStep (train/step.h). On a backend that can capture
// (Backend::supports_capture: CUDA), a step whose work is the same launches every time is
// recorded once per batch shape and then replayed as one launch, since a small model's step on
// a GPU is otherwise bound by launching its kernels one by one. This class keeps, per shape,
// where that shape stands: its first kWarmSteps steps run uncaptured (the first sizes the arenas,
// the GEMM plans and the workspaces; the second's resets merge what overflowed, which a model's
// own arena does inside its forward), so the capture allocates nothing; the next is captured and
// run, every later one replayed; and it says, once each, why a step runs uncaptured.
//
// What varies per step reaches a replay through memory, never through the capture's host
// values: the batch is staged into the step's arena (the same addresses each step of a shape,
// device_batch.h's staged_batch; on a GPU one device copy from the landing buffer its copy lane
// filled, backend/batch_landing.h), AdamW's learning rate and host update counts are uploaded
// before the launch (Optimizer::prepare), and fp16's loss scale, overflow flag and skip count
// live in the backend's memory, where the captured unscale, clipping, AdamW and scale update
// read and write them (optim/loss_scaler.h), and dropout's per-step seed is staged with the batch
// (the masks mix it as they run: backend/dropout_seed.h). What cannot, makes TrainStep refuse:
// for the whole run (train.grad_accum > 1, several ranks, an optimizer with host scalars, a
// host-loop objective), or per shape (variable-length batches, a
// target count that changes between batches of one shape, a model regulariser, a failed
// capture). A capture is redone when the optimizer's updates change (parameter groups) or the
// backend moved memory it reads.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/batch.h"
#include "core/tensor.h"

namespace seqtrain {

class StepGraphs {
 public:
  static constexpr int kWarmSteps = 2;
  struct Entry {
    enum class State { warming, ready, captured, refused } state = State::warming;
    int warm = 0;        // uncaptured steps so far (warming)
    uint64_t id = 0;     // the backend's capture (captured)
    int64_t count = 0;   // targets the capture's loss gradient was weighted for
    uint64_t plan = 0;   // the optimizer's plan() it queued
    Tensor pred;         // the capture's prediction: what the objective counts a replay's targets against
  };

  // note: where "why uncaptured" lines go (the run's log), each said once.
  StepGraphs(Backend& backend, std::function<void(const std::string&)> note);
  ~StepGraphs();  // drops every capture
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // The entry of the batch's shape (a new one at its first step); null, with the reason said
  // once, when such a batch is never captured.
  Entry* entry(const Batch& host_batch);
  // No captures of e's shape from now on, saying why once.
  void refuse(Entry& e, const std::string& why);
  // Drops e's capture: the shape is captured again at its next step.
  void forget(Entry& e);
  void say(const std::string& line);
  // Captures made and replays launched so far (tests, the log).
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  void count_capture() { ++captures_; }
  void count_replay() { ++replays_; }

 private:
  Backend& backend_;
  std::function<void(const std::string&)> note_;
  std::map<std::vector<int64_t>, Entry> entries_;  // by the batch tensors' dtypes and shapes
  std::set<std::string> said_;
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace seqtrain
