#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace seqtrain {

void LrSchedule::load_state(const ScheduleState& s) {
  ST_CHECK(s.name == name(), "learning-rate schedule state is for '{}' but the configured schedule "
           "is '{}'; resume with the schedule the checkpoint was trained with", s.name, name());
}

namespace {

void check_step(int64_t step) {
  ST_CHECK(step >= 0, "learning-rate schedule asked for step {}; steps count from 0", step);
}

class ConstantSchedule : public LrSchedule {
 public:
  explicit ConstantSchedule(const ScheduleOptions& o) : base_(o.base_lr) {}
  std::string_view name() const override { return "constant"; }
  double lr(int64_t step) const override { check_step(step); return base_; }

 private:
  double base_;
};

class StepSchedule : public LrSchedule {
 public:
  explicit StepSchedule(const ScheduleOptions& o) : base_(o.base_lr), step_size_(o.step_size), gamma_(o.gamma) {
    ST_CHECK(step_size_ > 0, "schedule step_size = {} is invalid; it must be > 0", step_size_);
    ST_CHECK(std::isfinite(gamma_) && gamma_ > 0, "schedule gamma = {} is invalid; it must be finite and > 0", gamma_);
  }
  std::string_view name() const override { return "step"; }
  double lr(int64_t step) const override {
    check_step(step);
    return base_ * std::pow(gamma_, static_cast<double>(step / step_size_));
  }

 private:
  double base_;
  int64_t step_size_;
  double gamma_;
};

class CosineSchedule : public LrSchedule {
 public:
  explicit CosineSchedule(const ScheduleOptions& o)
      : base_(o.base_lr), min_(o.min_lr), warmup_(o.warmup_steps), total_(o.total_steps) {
    ST_CHECK(total_ > 0, "schedule total_steps = {} is invalid; the cosine schedule needs the run's "
             "total optimizer steps (> 0)", total_);
    ST_CHECK(warmup_ >= 0 && warmup_ <= total_,
             "schedule warmup_steps = {} is invalid; it must be between 0 and total_steps ({})", warmup_, total_);
    ST_CHECK(std::isfinite(min_) && min_ >= 0 && min_ <= base_,
             "schedule min_lr = {} is invalid; it must be between 0 and the base lr ({})", min_, base_);
  }
  std::string_view name() const override { return "cosine"; }
  double lr(int64_t step) const override {
    check_step(step);
    if (step < warmup_) return base_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
    const double span = static_cast<double>(std::max<int64_t>(1, total_ - warmup_));
    const double progress = std::min(1.0, static_cast<double>(step - warmup_) / span);
    return min_ + (base_ - min_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }

 private:
  double base_, min_;
  int64_t warmup_, total_;
};

// Mirrors torch's ReduceLROnPlateau.step(): an improvement resets the bad-epoch count, a
// cooldown swallows bad epochs, and more than `patience` bad epochs in a row multiply the
// rate by `factor` (not below min_lr, and not at all when the change would be below eps).
class PlateauSchedule : public LrSchedule {
 public:
  explicit PlateauSchedule(const ScheduleOptions& o)
      : min_mode_(o.mode == "min"), rel_(o.threshold_mode == "rel"), factor_(o.factor), threshold_(o.threshold),
        min_lr_(o.min_lr), eps_(o.eps), patience_(o.patience), cooldown_(o.cooldown), lr_(o.base_lr) {
    ST_CHECK(o.mode == "min" || o.mode == "max", "schedule mode = '{}' is unknown; expected min or max", o.mode);
    ST_CHECK(o.threshold_mode == "rel" || o.threshold_mode == "abs",
             "schedule threshold_mode = '{}' is unknown; expected rel or abs", o.threshold_mode);
    ST_CHECK(factor_ >= 0 && factor_ < 1, "schedule factor = {} is invalid; it must be in [0, 1)", factor_);
    ST_CHECK(patience_ >= 0, "schedule patience = {} is invalid; it must be >= 0", patience_);
    ST_CHECK(cooldown_ >= 0, "schedule cooldown = {} is invalid; it must be >= 0", cooldown_);
    ST_CHECK(std::isfinite(threshold_) && threshold_ >= 0, "schedule threshold = {} is invalid; it must be >= 0", threshold_);
    ST_CHECK(std::isfinite(min_lr_) && min_lr_ >= 0, "schedule min_lr = {} is invalid; it must be >= 0", min_lr_);
    ST_CHECK(std::isfinite(eps_) && eps_ >= 0, "schedule eps = {} is invalid; it must be >= 0", eps_);
    best_ = worst();
  }
  std::string_view name() const override { return "plateau"; }
  double lr(int64_t step) const override { check_step(step); return lr_; }

  void observe(double metric) override {
    ++last_epoch_;
    if (better(metric, best_)) {
      best_ = metric;
      num_bad_ = 0;
    } else {
      ++num_bad_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      num_bad_ = 0;
    }
    if (num_bad_ > patience_) {
      const double reduced = std::max(lr_ * factor_, min_lr_);
      if (lr_ - reduced > eps_) lr_ = reduced;
      cooldown_counter_ = cooldown_;
      num_bad_ = 0;
    }
  }

  ScheduleState state() const override {
    return {"plateau",
            {{"lr", lr_},
             {"best", best_},
             {"num_bad_epochs", static_cast<double>(num_bad_)},
             {"cooldown_counter", static_cast<double>(cooldown_counter_)},
             {"last_epoch", static_cast<double>(last_epoch_)}}};
  }

  void load_state(const ScheduleState& s) override {
    LrSchedule::load_state(s);
    auto get = [&](const char* key) {
      auto it = s.values.find(key);
      ST_CHECK(it != s.values.end(), "plateau schedule state lacks '{}'; the checkpoint is incomplete", key);
      return it->second;
    };
    const double lr = get("lr"), best = get("best"), bad = get("num_bad_epochs"),
                 cool = get("cooldown_counter"), epoch = get("last_epoch");
    ST_CHECK(std::isfinite(lr) && lr >= 0, "plateau schedule state has lr = {}; it must be finite and >= 0", lr);
    lr_ = lr;
    best_ = best;
    num_bad_ = static_cast<int64_t>(bad);
    cooldown_counter_ = static_cast<int64_t>(cool);
    last_epoch_ = static_cast<int64_t>(epoch);
  }

 private:
  double worst() const {
    return min_mode_ ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  // torch's is_better(); comparisons with NaN are false, so a NaN metric is a bad epoch.
  bool better(double a, double best) const {
    if (min_mode_) return rel_ ? a < best * (1.0 - threshold_) : a < best - threshold_;
    return rel_ ? a > best * (threshold_ + 1.0) : a > best + threshold_;
  }

  bool min_mode_, rel_;
  double factor_, threshold_, min_lr_, eps_;
  int64_t patience_, cooldown_;
  double lr_;
  double best_ = 0;
  int64_t num_bad_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace

std::unique_ptr<LrSchedule> make_schedule(const ScheduleOptions& opts) {
  ST_CHECK(std::isfinite(opts.base_lr) && opts.base_lr >= 0,
           "schedule base lr = {} is invalid; it must be finite and >= 0", opts.base_lr);
  if (opts.name == "constant") return std::make_unique<ConstantSchedule>(opts);
  if (opts.name == "step") return std::make_unique<StepSchedule>(opts);
  if (opts.name == "cosine") return std::make_unique<CosineSchedule>(opts);
  if (opts.name == "plateau") return std::make_unique<PlateauSchedule>(opts);
  fail("unknown learning-rate schedule '{}'; expected one of: constant, step, cosine, plateau", opts.name);
}

nlohmann::json schedule_state_to_json(const ScheduleState& s) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [key, v] : s.values) {
    if (std::isnan(v)) values[key] = "nan";
    else if (std::isinf(v)) values[key] = v > 0 ? "inf" : "-inf";
    else values[key] = v;
  }
  return {{"name", s.name}, {"values", values}};
}

ScheduleState schedule_state_from_json(const nlohmann::json& j) {
  ST_CHECK(j.is_object() && j.contains("name") && j["name"].is_string(),
           "schedule state in state.json must be an object with a string 'name'");
  ScheduleState s;
  s.name = j["name"].get<std::string>();
  if (!j.contains("values")) return s;
  ST_CHECK(j["values"].is_object(), "schedule state 'values' in state.json must be an object");
  for (const auto& [key, v] : j["values"].items()) {
    if (v.is_number()) {
      s.values[key] = v.get<double>();
    } else if (v.is_string() && (v == "inf" || v == "-inf" || v == "nan")) {
      const std::string t = v.get<std::string>();
      s.values[key] = t == "nan" ? std::numeric_limits<double>::quiet_NaN()
                                 : (t == "inf" ? 1.0 : -1.0) * std::numeric_limits<double>::infinity();
    } else {
      fail("schedule state value '{}' in state.json is {}; expected a number", key, v.dump());
    }
  }
  return s;
}

}  // namespace seqtrain
