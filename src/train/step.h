// TrainStep: one optimisation step, read top to bottom: forward, loss, backward into the flat
// gradient buffer, and every grad_accum micro-batches: clip the global norm, take the
// scheduled learning rate, update the flat parameter buffer, zero the gradients.
// Under fp16 a LossScaler scales the loss gradient and, at the accumulation boundary, unscales
// the gradients before clipping; a step whose gradients overflowed is skipped: no parameter
// or optimizer-state change, but it counts as a step, so the LR schedule moves on as in a
// PyTorch loop that calls scheduler.step() after scaler.step(optimizer) either way.
// Losses are summed where they are computed and read once per log interval (take_loss()).
#pragma once
#include <cstdint>

#include "core/arena.h"
#include "models/model.h"
#include "nn/loss.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/communicator.h"

namespace seqtrain {

struct StepOptions {
  LossKind loss = LossKind::mse;
  LossOptions loss_options;
  double grad_clip = 0.0;  // max global L2 norm; 0 turns clipping off
  int64_t grad_accum = 1;  // micro-batches per optimizer update
  LossScaler* scaler = nullptr;  // dynamic loss scaling (fp16); null: none
  Communicator* comm = nullptr;  // sums the gradients over ranks once per optimizer step; null: one process
};

struct StepResult {
  bool updated = false;      // this micro-batch completed an optimizer step (skipped ones included)
  bool skipped = false;      // ... whose gradients overflowed: nothing was updated (fp16 only)
  double grad_norm = 0.0;    // pre-clip norm of the unscaled gradients (when updated; NaN when skipped)
  double lr = 0.0;           // learning rate used (when updated)
};

class TrainStep {
 public:
  TrainStep(Model& model, Optimizer& optimizer, LrSchedule& schedule, StepOptions options);

  // x: [B, lookback, features], y: [B, outputs]. seed drives this step's dropout masks.
  StepResult run(const Tensor& x, const Tensor& y, uint64_t seed);
  // Mean loss over the micro-batches since the last call (and how many there were).
  double take_loss(int64_t* batches = nullptr);
  int64_t updates() const { return updates_; }
  void set_updates(int64_t n) { updates_ = n; }
  Arena& arena() { return arena_; }

 private:
  Model& model_;
  Optimizer& optimizer_;
  LrSchedule& schedule_;
  StepOptions options_;
  Arena arena_;
  int64_t micro_ = 0;    // micro-batches into the current accumulation
  int64_t updates_ = 0;  // optimizer steps taken, skipped ones included (the schedule's step)
  double loss_sum_ = 0.0;
  int64_t loss_count_ = 0;
};

}  // namespace seqtrain
