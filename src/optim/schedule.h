// LrSchedule: the learning rate as a function of the optimizer step count (and, for
// reduce-on-plateau, of the validation metrics observed so far). The trainer asks lr(step)
// before every optimizer step, where `step` is the number of steps already taken (0 for the
// first), and calls observe(metric) after every validation.
//
// Schedules (ScheduleOptions::name):
//   constant  lr = base_lr
//   step      lr = base_lr * gamma^floor(step / step_size)
//             torch.optim.lr_scheduler.StepLR stepped once per optimizer step.
//   cosine    linear warmup, then cosine decay from base_lr to min_lr:
//               step <  W:  lr = base_lr * (step + 1) / W
//               step >= W:  p  = min(1, (step - W) / max(1, T - W))
//                           lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2
//             with W = warmup_steps, T = total_steps. Warmup starts at base_lr/W rather than 0
//             so the first step is not wasted; step T and beyond stay at min_lr.
//   plateau   torch.optim.lr_scheduler.ReduceLROnPlateau with the same defaults (mode min,
//             factor 0.1, patience 10, threshold 1e-4 relative, cooldown 0, min_lr 0,
//             eps 1e-8); lr(step) ignores the step and returns the current rate.
//
// Constant, step and cosine are pure functions of the step, so resuming needs only the step
// count; plateau carries its counters in state(). Every schedule's state round-trips through
// state()/load_state() and, for state.json, through schedule_state_to_json/from_json.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace seqtrain {

// What make_schedule() builds. Fields a given schedule does not use are ignored.
struct ScheduleOptions {
  std::string name = "constant";    // constant | step | cosine | plateau
  double base_lr = 1e-3;
  // step
  int64_t step_size = 1000;
  double gamma = 0.1;
  // cosine
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr = 0.0;              // floor for cosine and plateau
  // plateau (names and defaults as torch's ReduceLROnPlateau)
  std::string mode = "min";         // min | max
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel"; // rel | abs
  int64_t cooldown = 0;
  double eps = 1e-8;                // reductions smaller than this are skipped
};

// A schedule's resumable state: its name plus named numbers (empty for pure schedules).
// Numbers may be infinite (plateau's `best` before the first metric).
struct ScheduleState {
  std::string name;
  std::map<std::string, double> values;
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string_view name() const = 0;
  // Learning rate for the optimizer step that follows `step` completed steps (step >= 0).
  virtual double lr(int64_t step) const = 0;
  // A validation metric; only plateau uses it. NaN counts as no improvement, as in torch.
  virtual void observe(double metric) {}
  virtual ScheduleState state() const { return {std::string(name()), {}}; }
  // Throws Error when the state belongs to another schedule or lacks a value.
  virtual void load_state(const ScheduleState& s);
};

// Validates opts and builds the schedule. Throws Error naming the bad option.
std::unique_ptr<LrSchedule> make_schedule(const ScheduleOptions& opts);

// JSON form for state.json: {"name": ..., "values": {...}}, with non-finite numbers written as
// the strings "inf", "-inf" and "nan" (JSON has no literal for them).
nlohmann::json schedule_state_to_json(const ScheduleState& s);
ScheduleState schedule_state_from_json(const nlohmann::json& j);

}  // namespace seqtrain
