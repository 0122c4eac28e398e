// TrainStep: one optimisation step, read top to bottom: forward, loss, backward into the flat
// gradient buffer, and every grad_accum micro-batches: clip the global norm, take the
// scheduled learning rate, update the flat parameter buffer, zero the gradients.
// Under fp16 a LossScaler scales the loss gradient and, at the accumulation boundary, unscales
// the gradients before clipping; a step whose gradients overflowed is skipped: no parameter
// or optimizer-state change, but it counts as a step, so the LR schedule moves on as in a
// PyTorch loop that calls scheduler.step() after scaler.step(optimizer) either way.
// Nothing is read back to the host inside a step (on a GPU each read is a synchronization that
// idles the device while the host queues the next work): the loss sum and the clipped gradient
// norm stay in the model's backend memory (sums_) and are read once per log interval
// (take_loss(), grad_norm()); the targets are counted, and checked, on the host before the
// batch's upload (Objective::count); the batch goes up with Backend::upload, or, where the
// backend has a copy lane (a GPU's second stream), on that lane into BatchLanding's two buffers,
// overlapping the previous step (backend/batch_landing.h). Under fp16 the
// skip is decided on the device too: clipping and AdamW read the scaler's found-inf flag there
// (Optimizer::set_skip_flag); only an optimizer that cannot (SGD) and train.zero's ranks read
// it back, once per optimizer step.
// StepResult::grad_norm is filled where reading it costs nothing (a host-accessible backend).
// With several ranks the gradients are summed over them at the boundary (StepOptions::comm): in
// buckets that the last micro-batch's backward starts (the overlap, train/grad_buckets.h); under
// train.zero the buckets reduce-scatter, so each rank holds the sums of its slice and updates
// that slice (docs/DISTRIBUTED.md).
//
// The loss is an Objective's (sum, count) (train/objective.h), so micro-batches that count
// different numbers of targets (an epoch's short last batch) average exactly: the step adds up
// the gradients of the SUMS and divides once, by the accumulation's total count, at the
// boundary. To keep every gradient the size it had when each micro-batch was a mean scaled by
// 1/grad_accum (what fp16's loss scaling and 16-bit gradient copies were tuned for), each
// micro-batch's sum gradient is weighted by scale / R, with R = grad_accum * the largest count
// met so far in the accumulation, and the boundary multiplies by R / total count. With equal
// micro-batches that factor is exactly 1 and skipped; a larger micro-batch arriving after a
// smaller one rescales what was summed before it by the ratio of the two R (fp32, rare).
// Everything depends only on the micro-batches of the current accumulation, so a resumed run
// that replays them follows the same arithmetic.
// With StepOptions::graphs on a backend that can capture, a step is captured once per batch shape
// and replayed (train/step_graphs.h): the same host bookkeeping and the same device work, bit for
// bit, queued as one launch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/batch_landing.h"
#include "backend/device_buffer.h"
#include "core/arena.h"
#include "models/model.h"
#include "nn/loss.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/communicator.h"
#include "train/objective.h"
#include "train/step_graphs.h"

namespace seqtrain {

class GradBuckets;

struct StepOptions {
  // Used only without `objective`: regression for mse/mae/huber, cross-entropy over whatever
  // label tensor the targets are for cross_entropy.
  LossKind loss = LossKind::mse;
  LossOptions loss_options;
  double grad_clip = 0.0;  // max global L2 norm; 0 turns clipping off
  int64_t grad_accum = 1;  // micro-batches per optimizer update
  LossScaler* scaler = nullptr;  // dynamic loss scaling (fp16); null: none
  Communicator* comm = nullptr;  // sums the gradients over ranks once per optimizer step; null: one process
  const Objective* objective = nullptr;  // what the step minimises (must outlive it); null: from `loss`
  // train.zero (ZeRO stage 1) on several ranks: the gradients are reduce-scattered, each rank
  // updates its slice of the parameters with its slice of AdamW's moments (the optimizer is
  // sharded by the constructor), and the parameters are all-gathered. One process: ignored.
  bool zero = false;
  // Overlap (train/grad_buckets.h) on several ranks: the gradient sum (train.zero: the
  // reduce-scatter) is cut into buckets of about this many values that start while the last
  // micro-batch's backward runs. 0: one collective after the backward.
  size_t bucket = 0;
  // runtime.cuda_graphs auto: capture and replay the step where the backend and the step allow
  // it (train/step_graphs.h); false (off): never.
  bool graphs = false;
  // Where the backend has a copy lane (a GPU's second stream): the batch goes up on it, beside the
  // previous step (backend/batch_landing.h); false: on the compute lane behind it, with upload()
  // (the one-stream path, which the tests hold the copy lane to).
  bool copy_lane = true;
  // Where the step's log lines go (why its steps run uncaptured); null: nowhere.
  std::function<void(const std::string&)> note{};
};

struct StepResult {
  bool updated = false;      // this micro-batch completed an optimizer step (skipped ones included)
  // ... whose gradients overflowed: nothing was updated (fp16 only). Where the device decides
  // the skip, known only where reading it costs nothing (a host-accessible backend); false on a
  // device, whose skips the loop reads at log intervals (LossScaler::take_skipped_since_report).
  bool skipped = false;
  // The pre-clip norm of the unscaled gradients (when updated, read where it costs nothing; NaN
  // when skipped or on a device).
  double grad_norm = 0.0;
  double lr = 0.0;           // learning rate used (when updated)
};

class TrainStep {
 public:
  TrainStep(Model& model, Optimizer& optimizer, LrSchedule& schedule, StepOptions options);
  ~TrainStep();

  // One micro-batch: the model reads the batch, and so does the objective (its targets, lengths).
  // seed drives this pass's dropout masks.
  StepResult run(const Batch& batch, uint64_t seed);
  // The same for a batch of just inputs and targets (benchmarks, tests).
  StepResult run(const Tensor& inputs, const Tensor& targets, uint64_t seed);
  // Mean loss per counted target since the last call: the loss sums over the counts (and the
  // count, so callers can combine intervals as mean * count).
  double take_loss(int64_t* count = nullptr);
  // The loss sum and count since take_loss(), left in place (a checkpoint's snapshot of them).
  double loss_sum(int64_t* count);
  // Starts the sums at such a snapshot (a resumed run), so the losses that follow add onto it in
  // the order an uninterrupted run adds them: its logged means are then the same bit for bit.
  void restore_loss(double sum, int64_t count);
  // The pre-clip gradient norm of the last optimizer step (NaN before the first; one host read).
  double grad_norm();
  const Objective& objective() const { return *objective_; }
  int64_t updates() const { return updates_; }
  // The captures of runtime.cuda_graphs; null when this run's steps are never captured.
  const StepGraphs* graphs() const { return graphs_.get(); }
  void set_updates(int64_t n) { updates_ = n; }
  Arena& arena() { return arena_; }
  // Activation memory of the last pass: the arena's high water plus what layers held outside it.
  size_t activation_bytes() const { return arena_.high_water() + scratch_bytes_; }
  // The activation memory the step holds: the arena's chunks (what its first step sized, slack
  // included) plus what layers held outside it (train.batch_size: auto counts this).
  size_t activation_capacity() const { return arena_.capacity() + scratch_bytes_; }

 private:
  Model& model_;
  Optimizer& optimizer_;
  LrSchedule& schedule_;
  // One micro-batch's forward, loss and backward into the gradients: stage, then pass.
  void compute(const Batch& host_batch, uint64_t seed);
  // The batch into the step's arena (reset first): copied where the device needs it, and always
  // when steps are captured (the addresses a replay reads), as is then the masks' seed; sets
  // mask_seed_. With a copy lane the batch is landing_'s, landed by run() (and copied from there
  // into the arena when captured).
  Batch stage(const Batch& host_batch, uint64_t seed);
  std::unique_ptr<BatchLanding> landing_;  // a backend with a copy lane; null otherwise
  DropoutSeed mask_seed_;  // the staged pass's dropout seed: the value, or its slot in the arena
  // The forward, loss and backward of a staged batch; returns the prediction. *host_values: the
  // pass added a host value to the loss (a model regulariser), which a capture cannot hold.
  Tensor pass(const Batch& batch, const Batch& host_batch, bool* host_values = nullptr);
  // A micro-batch's count of targets into the loss count and the accumulation.
  void count_in(int64_t count);
  // How the boundary queues its device work: the optimizer's step(), or apply() after the step's
  // prepare() (a step that may be captured), or none (a replay queued it).
  enum class Queue { step, apply, none };
  // Counts it into the accumulation; at the boundary: reduce, clip, update.
  StepResult finish_micro_batch(Queue queue = Queue::step);
  // runtime.cuda_graphs: why no step of this run can be captured ("" when they can).
  std::string uncapturable() const;
  // fp16 with an optimizer that skips an overflowed step on the device (Optimizer::set_skip_flag).
  bool device_skip() const;
  // StepResult's skip and norm where the host reads them for free.
  void read_free(StepResult& r);
  // The step of a batch whose shape has an entry: first seen (uncaptured), captured, or replayed.
  StepResult run_graph(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed);
  StepResult capture(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed);
  StepResult replay(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed);
  std::unique_ptr<StepGraphs> graphs_;
  // Folds this micro-batch's count into the accumulation's reference R (see the top).
  void grow_reference(int64_t count);
  // At the boundary: gradients *= R / total (the accumulation's count of targets over all
  // ranks), so they are the gradient of the mean.
  void normalize_accumulated(double total);
  void scale_grads(double factor);
  void add_aux_loss(double sum);
  // The boundary's unscale, clip and update over this rank's slice (train.zero); returns false
  // when the gradients overflowed on any rank (fp16).
  bool update_shard(StepResult& r);
  bool zero_ = false;  // options_.zero on several ranks
  // The overlap: at the accumulation's last micro-batch, the count of targets over every rank
  // and the buckets that sum the gradients (begun before its backward, or at the boundary by a
  // rank with nothing to compute). Not with frozen entries: their gradients are zeroed after
  // the backward, too late for a bucket that left before.
  bool overlap() const;
  void begin_buckets();
  std::unique_ptr<GradBuckets> buckets_;

  StepOptions options_;
  std::unique_ptr<Objective> owned_objective_;  // when options_.objective is null
  const Objective* objective_ = nullptr;
  Arena arena_;
  size_t scratch_bytes_ = 0;  // the last pass's StepContext::scratch_bytes
  int64_t micro_ = 0;    // micro-batches into the current accumulation
  int64_t updates_ = 0;  // optimizer steps taken, skipped ones included (the schedule's step)
  // In the model's backend memory, as doubles: [0] the loss sum since take_loss(), [1] its
  // correct count (classification), [2] the last step's pre-clip gradient norm.
  DeviceBuffer sums_;
  double* sums() { return reinterpret_cast<double*>(sums_.data()); }
  void read_sums(int first, double* out, int n);
  bool norm_valid_ = false;
  int64_t loss_count_ = 0;   // since take_loss(): counted on the host
  int64_t accum_count_ = 0;  // targets counted in the current accumulation
  double reference_ = 0.0;   // R: grad_accum * the largest micro-batch count so far; 0 = none yet
};

}  // namespace seqtrain
