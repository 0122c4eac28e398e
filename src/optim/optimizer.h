// Optimizer: updates one flat parameter buffer from one flat gradient buffer in a single fused
// pass. Its state (moments, momentum) is itself a set of flat buffers of the same length, named
// like the entries of torch.optim's per-parameter state ("exp_avg", "exp_avg_sq",
// "momentum_buffer"), so a checkpoint writes each as one tensor and a resumed run continues
// bit for bit. AdamW and SGD match torch.optim.AdamW / torch.optim.SGD (tests/test_optim.cpp).
// The buffers are device memory of the optimizer's backend (DeviceBuffer), allocated at the first
// step or by load_state(); state() downloads them into host vectors and load_state() uploads.
//
// The learning rate is an argument of step() rather than a setting, because the schedule
// (optim/schedule.h) owns it; the optimizer itself never changes it.
//
// Parameter groups (optim/param_groups.h: lr scale, weight decay, frozen) arrive as runs of the
// flat buffer (set_groups). Like torch, which keeps a `step` per parameter, created at its
// first update, the optimizer counts updates per element range: a stretch frozen for K steps
// and then trained starts its bias correction (AdamW) and its momentum buffer (SGD) afresh.
// Those counts are part of the state, so a resume across an unfreeze continues bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/device_buffer.h"
#include "optim/param_groups.h"

namespace seqtrain {

// Buffers shorter than this are updated by one thread: starting an OpenMP team costs more than
// the whole pass over a few thousand floats.
inline constexpr size_t kOptimParallelMin = size_t{1} << 15;

// What make_optimizer() builds. Fields a given optimizer does not use are ignored.
struct OptimizerOptions {
  std::string name = "adamw";   // "adamw" or "sgd"
  double lr = 1e-3;             // the base learning rate; schedules start from it
  double beta1 = 0.9;           // adamw
  double beta2 = 0.999;         // adamw
  double eps = 1e-8;            // adamw
  // Unset means torch's default for the chosen optimizer: 0.01 for adamw, 0 for sgd.
  std::optional<double> weight_decay{};
  double momentum = 0.0;        // sgd
  double dampening = 0.0;       // sgd
  bool nesterov = false;        // sgd; needs momentum > 0 and dampening == 0 (as torch)
};

// How many updates the elements [begin, end) have had (torch's per-parameter `step`).
struct StepCount {
  size_t begin = 0, end = 0;
  int64_t steps = 0;
  bool operator==(const StepCount&) const = default;
};

// A host copy of an optimizer's state for checkpoints. `step` counts completed step() calls;
// each buffer has the length of the parameter buffer. `param_steps`: the per-range update
// counts, in order, covering the buffer; empty when every element has had all `step` updates
// (no group was ever frozen; checkpoints of earlier versions). A freshly made optimizer has
// step 0 and no buffers.
struct OptimizerState {
  int64_t step = 0;
  std::map<std::string, std::vector<float>> buffers;
  std::vector<StepCount> param_steps;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The optimizer's name as the config spells it ("adamw", "sgd"), for errors and the log.
  std::string_view name() const { return name_; }

  // One update of params[0, n) from grads[0, n) with learning rate lr. The first call fixes n;
  // later calls (and load_state) must agree with it.
  virtual void step(float* params, const float* grads, size_t n, double lr) = 0;

  // Completed step() calls (AdamW's bias corrections depend on each element's own count:
  // param_steps()); with a skip flag, steps the device skipped are not counted (one host read).
  int64_t step_count() const { return step_ - device_skips(); }
  // The update count of every element, as runs (see OptimizerState::param_steps, never empty
  // here once n is known: one run at step_count() until a group is frozen).
  std::vector<StepCount> param_steps(size_t n) const;

  // The names of the state buffers this optimizer keeps, in a fixed order (may be empty, e.g.
  // SGD without momentum).
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }

  // Downloads the buffers (one copy each; a plain memcpy on a host-accessible backend). Refused
  // on a shard (set_shard): a checkpoint needs every element, gathered over the ranks
  // (train/zero_state.h).
  OptimizerState state() const;
  // ZeRO stage 1 (train.zero): step() updates only the elements [begin, end) of the buffers it
  // is handed, and the state buffers hold just those (end - begin values each), so each of N
  // ranks keeps 1/N of the moments. The decay mask, the groups and the update counts still
  // speak of the whole buffer and are the same on every rank. Set before the first step;
  // load_state() then takes a whole state (a checkpoint's) and keeps the shard's part.
  void set_shard(size_t begin, size_t end);
  bool sharded() const { return shard_end_ > 0; }
  size_t shard_begin() const { return shard_begin_; }
  size_t shard_end() const { return shard_end_; }
  // The state with the shard's buffers only (what train/zero_state.h gathers).
  OptimizerState shard_state() const;
  // Replaces the state, uploading the buffers to the backend. The buffer names must be exactly buffer_names() (or none at step 0)
  // and all of one length; anything else throws Error and leaves the optimizer untouched.
  void load_state(const OptimizerState& s);
  // Back to step 0 with no buffers, as if freshly made.
  void reset();

  // Per-element weight decay switch: mask[i] != 0 decays element i. Empty (the default) decays
  // every element, which is what torch does with a single parameter group; a mask is torch's
  // two param groups, one with weight_decay 0. The trainer passes ParamStore::decay_mask(),
  // built from the entries' `decay` flags (models/model.h's policy, train.optimizer.decay).
  // The mask is kept as runs of equal flags, and step() updates run by run (decay 0 on the
  // others), so the per-element update loop has no branch on it.
  void set_decay_mask(std::vector<uint8_t> mask);
  const std::vector<uint8_t>& decay_mask() const { return decay_mask_; }

  // Parameter groups as runs covering [0, n) in order (optim/param_groups.h's group_runs);
  // empty: one group, the optimizer's own settings. A run's lr is step()'s times its lr_scale;
  // a set weight_decay decays every element of the run by it (the decay mask aside); a frozen
  // run is not touched: parameters, moments and update count stay as they are. May change
  // between steps (the fine-tuning schedule unfreezes the encoder at an epoch).
  void set_groups(std::vector<GroupRun> runs);
  const std::vector<GroupRun>& groups() const { return groups_; }

  const OptimizerOptions& options() const { return opts_; }
  // The device whose AdamW/SGD update runs over the buffers (the model's ParamStore::backend()).
  Backend& backend() const { return *backend_; }

  // A captured step (runtime.cuda_graphs, train/step_graphs.h) splits step() in two: prepare()
  // is its host half (the checks, the update counts, this step's scalars uploaded to the
  // backend's memory), run before the capture or the replay; apply() queues the updates, which
  // read those scalars as they run, so one capture serves every step's learning rate and bias
  // corrections. Together they update as step() does, bit for bit. Only optimizers that say
  // device_scalars() (AdamW; the others refuse). plan() changes whenever apply() would queue other
  // updates than before (another group layout): a capture of the old ones must be redone.
  virtual bool device_scalars() const { return false; }
  virtual void prepare(float* params, const float* grads, size_t n, double lr);
  virtual void apply();
  virtual uint64_t plan() const { return 0; }

  // fp16's found-inf flag in the backend's memory (optim/loss_scaler.h), or null: while set, an
  // update is skipped on the device whenever the flag is nonzero when it runs (torch's fused
  // AdamW taking found_inf), so the host never learns of a skip in the step. The device counts
  // the skips, and a skipped update does not advance the update counts: its bias corrections
  // are formed on the device from them (AdamWDeviceStep). The host's counts are the updates it
  // asked for; the readers (step_count, param_steps, state) subtract the device's count (a host
  // read), and set_groups folds it in before the frozen ranges change. Only optimizers that say
  // device_scalars(); set before the first step.
  void set_skip_flag(const float* flag);
  const float* skip_flag() const { return skip_flag_; }

 protected:
  // name and buffer_names are fixed for the optimizer's life (SGD's follow its momentum option).
  Optimizer(std::string name, std::vector<std::string> buffer_names, OptimizerOptions opts,
            Backend& backend = default_backend())
      : opts_(std::move(opts)), name_(std::move(name)), buffer_names_(std::move(buffer_names)), backend_(&backend) {}

  // Checks the arguments of step() and allocates the zeroed state buffers (device memory of
  // backend()) on the first call; later calls allocate nothing.
  void begin_step(const float* params, const float* grads, size_t n, double lr);
  float* buffer(size_t i) { return buffers_[i].data(); }
  bool has_buffers() const { return !buffers_.empty(); }
  // [begin, end) ranges of the parameter buffer whose elements all decay or all do not, in
  // order, covering [0, n): the mask's runs, or one decaying run without a mask.
  using DecayRun = DecayRange;
  std::vector<DecayRun> decay_runs(size_t n) const;
  // Runs of the whole buffer cut to the shard and shifted to start at its first element (the
  // runs themselves without a shard).
  std::vector<DecayRun> shard_runs(const std::vector<DecayRun>& runs) const;

  // One backend update of this step: the ranges that share an lr scale, a weight decay and an
  // update count (before this step), each with its decay flag. Without groups and frozen
  // history it is one update over the decay mask's runs, as before groups existed.
  struct GroupUpdate {
    double lr_scale = 1.0;
    double weight_decay = 0.0;  // for the runs whose flag is set
    int64_t steps = 0;          // updates these elements had before this one
    std::vector<DecayRun> runs;
  };
  // This step's updates over [0, n) (frozen ranges in none), and counts every updated range
  // one step further (call once per step, after begin_step).
  std::vector<GroupUpdate> plan_updates(size_t n);

  OptimizerOptions opts_;
  int64_t step_ = 0;  // the updates asked for (skipped ones included until fold_skips)
  // The device's skip counter (a double in the backend's memory; null without a skip flag) and
  // its value when the host last folded it into its counts: an update's t on the device is its
  // host count + skips_folded_ - the counter.
  double* device_skip_counter() { return skip_flag_ ? reinterpret_cast<double*>(skips_.data()) : nullptr; }
  double skips_folded() const { return skips_folded_; }

 private:
  // Skips counted on the device since the last fold (0 without a skip flag; a host read with).
  int64_t device_skips() const;
  // param_steps_ with `skips` taken off every range the current groups update.
  std::vector<StepCount> counts_less(int64_t skips) const;
  // Takes the device's skips into step_ and param_steps_ (before the frozen ranges change).
  void fold_skips();
  // The device's counter back to 0 (a state loaded or reset: its counts are the true ones).
  void clear_skips();
  const float* skip_flag_ = nullptr;
  DeviceBuffer skips_;
  double skips_folded_ = 0;

  std::string name_;
  std::vector<std::string> buffer_names_;
  Backend* backend_;
  size_t n_ = 0;                          // parameter count, fixed by the first step or load
  size_t shard_begin_ = 0, shard_end_ = 0;  // set_shard's range; end 0: no shard
  std::vector<DeviceBuffer> buffers_;      // in buffer_names() order
  std::vector<uint8_t> decay_mask_;
  std::vector<DecayRun> runs_;  // decay_mask_ as runs; empty without a mask
  std::vector<GroupRun> groups_;        // empty: one group of the optimizer's settings
  std::vector<StepCount> param_steps_;  // empty: every element at step_
};

// Validates opts (ranges as torch checks them, and the name) and builds the optimizer.
// Throws Error naming the bad option and its allowed range. The update runs on `backend`.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& opts, Backend& backend = default_backend());

}  // namespace seqtrain
