// The LR range test: see lr_finder.h.
#include "train/lr_finder.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "backend/autotune.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/precision.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/loader.h"
#include "optim/schedule.h"
#include "train/batch_finder.h"
#include "train/data_plan.h"
#include "train/group_schedule.h"
#include "train/objective.h"
#include "train/run_parts.h"
#include "train/step.h"
#include "train/trainer.h"

namespace seqtrain {
namespace {

// lr(i) = start * (end / start)^(i / (steps - 1)): `start` at the first step, `end` at the last.
class ExponentialRange final : public LrSchedule {
 public:
  ExponentialRange(double start, double end, int64_t steps) : start_(start), end_(end), steps_(steps) {}
  std::string_view name() const override { return "lr_range"; }
  double lr(int64_t step) const override {
    const double t = static_cast<double>(std::min(step, steps_ - 1)) / static_cast<double>(steps_ - 1);
    return start_ * std::pow(end_ / start_, t);
  }

 private:
  double start_, end_;
  int64_t steps_;
};

// Points before the minimum it takes to read a descent off the curve: fewer, and the slope is
// the smoothing's start-up rather than the model's.
constexpr size_t kMinDescent = 5;

}  // namespace

void check_lr_finder_options(const LrFinderOptions& o) {
  ST_CHECK(std::isfinite(o.start) && o.start > 0,
           "--start {}: the range's first learning rate must be a number > 0, e.g. --start 1e-7", o.start);
  ST_CHECK(std::isfinite(o.end) && o.end > 0,
           "--end {}: the range's last learning rate must be a number > 0, e.g. --end 10", o.end);
  ST_CHECK(o.start < o.end,
           "--start {} is not below --end {}: the test raises the learning rate from --start to --end; give a smaller "
           "--start or a larger --end (the defaults are 1e-7 and 10)", o.start, o.end);
  ST_CHECK(o.steps >= 2, "--steps {}: the test needs at least 2 steps to go from --start to --end; give --steps 2 or "
           "more (the default is 100)", o.steps);
}

LrCurve::LrCurve(int64_t steps) : beta_(std::clamp(1.0 - 20.0 / static_cast<double>(steps), 0.0, 0.98)) {}

bool LrCurve::add(int64_t step, double lr, double loss, std::string* why) {
  if (!std::isfinite(loss)) {
    *why = fmt::format("loss not finite at step {} (lr {:.3g})", step, lr);
    return false;
  }
  average_ = beta_ * average_ + (1 - beta_) * loss;
  // Bias-corrected (Adam's): the average starts at 0. Without smoothing (beta 0) it is the loss.
  const double smoothed = beta_ > 0 ? average_ / (1 - std::pow(beta_, static_cast<double>(points_.size() + 1))) : loss;
  points_.push_back(LrPoint{step, lr, loss, smoothed});
  if (points_.size() == 1 || smoothed < best_) best_ = smoothed;
  if (smoothed > kDivergence * best_) {
    *why = fmt::format("diverged at step {} (lr {:.3g}): the smoothed loss {:.4g} passed {:.0f}x the best {:.4g}",
                       step, lr, smoothed, kDivergence, best_);
    return false;
  }
  return true;
}

void suggest_lr(LrFinderResult& r, double start, double end) {
  const auto& p = r.points;
  ST_CHECK(!p.empty(), "the LR range test has no finite loss to suggest from: the first step already failed");
  r.min_index = 0;
  for (size_t i = 1; i < p.size(); ++i)
    if (p[i].smoothed < p[r.min_index].smoothed) r.min_index = i;
  // The steepest fall of the smoothed loss per log(lr), central differences, up to the minimum.
  size_t steepest = 0;
  double slope_min = 0;
  if (r.min_index >= kMinDescent) {
    for (size_t i = 1; i < r.min_index; ++i) {
      const double slope =
          (p[i + 1].smoothed - p[i - 1].smoothed) / (std::log(p[i + 1].lr) - std::log(p[i - 1].lr));
      if (slope < slope_min) {
        slope_min = slope;
        steepest = i;
      }
    }
  }
  if (slope_min < 0) {
    r.suggestion = p[steepest].lr;
    r.rule = "steepest descent of the smoothed loss";
  } else {
    r.suggestion = std::clamp(p[r.min_index].lr / 10, start, end);
    r.rule = "a tenth of the lr at the minimum";
  }
}

LrFinderResult find_lr(const Config& given, const LrFinderOptions& o,
                       const std::function<void(const std::string&)>& note) {
  check_lr_finder_options(o);
  Config config = given;
  // The batches are built as they are read: a data.cache miss would otherwise write a cache file,
  // and the test writes nothing but its own output.
  config.data.cache.clear();
  const int threads = set_cpu_threads(static_cast<int>(config.runtime.threads));
  const DataPlan plan = plan_data(config);
  std::string workers_why;
  const int64_t workers = loader_workers(config, threads, &workers_why);
  const TrainFeed feed = training_feed(plan, config, workers);
  note("data: " + plan.source);
  const ModelSpec spec = model_spec(config, plan);
  const Precision precision = resolve_precision(config.runtime.precision, spec.backend, nullptr);
  if (config.train.batch_size == kAutoBatch) {
    const BatchChoice choice = choose_auto_batch(config, plan, *feed.source, spec, precision, workers);
    for (const std::string& line : choice.lines()) note(line);
    config.train.batch_size = choice.batch;
  }
  const TrainConfig& t = config.train;
  std::vector<std::string> lines;
  auto model = build_run_model(config, spec, ModelEnv{spec.autotune ? std::make_shared<Autotuner>() : nullptr, precision},
                               /*load_weights=*/true, &lines);
  for (const std::string& line : lines) note(line);
  auto optimizer = build_run_optimizer(t, *model);
  // The first epoch's parameter groups (a frozen encoder stays frozen, as it would be in training).
  GroupSchedule groups(t, model->params());
  groups.apply(0, model->params(), *optimizer);
  ExponentialRange schedule(o.start, o.end, o.steps);
  auto scaler = build_loss_scaler(config, precision);
  auto objective = make_objective(config, plan);
  TrainStep step(*model, *optimizer, schedule, run_step_options(t, scaler.get(), nullptr, objective.get()));
  Loader loader(*feed.source, LoaderOptions{.workers = workers, .prefetch = config.data.prefetch,
                                            .batch_size = t.batch_size, .shuffle = t.shuffle, .seed = config.seed,
                                            .allocator = model->params().backend().pinned_allocator(),
                                            .layout = sample_layout(plan, MaskDraw::per_epoch)});
  int64_t epoch = 0, micro = 0;
  loader.start_epoch(epoch);
  LrFinderResult r;
  r.batch_size = t.batch_size;
  r.stopped = "all steps";
  LrCurve curve(o.steps);
  for (int64_t i = 0; i < o.steps; ++i) {
    StepResult sr;
    for (int64_t k = 0; k < t.grad_accum; ++k) {  // one optimizer step: grad_accum micro-batches
      const Batch* batch = loader.next();
      if (!batch) {  // the split ran out: on into the next epoch's order
        loader.start_epoch(++epoch);
        batch = loader.next();
      }
      ST_CHECK(batch != nullptr, "the data loader gave no batch for the LR range test");
      sr = step.run(*batch, mix_seed(config.seed, static_cast<uint64_t>(micro++)));
      loader.release(batch);
    }
    const double loss = step.take_loss();  // the mean over this step's micro-batches
    if (!curve.add(i, sr.lr, loss, &r.stopped)) break;
  }
  r.points = curve.points();
  suggest_lr(r, o.start, o.end);
  return r;
}

std::string lr_finder_csv(const LrFinderResult& r) {
  std::string out = "step,lr,loss,smoothed_loss\n";
  for (const LrPoint& p : r.points) out += fmt::format("{},{:.9g},{:.9g},{:.9g}\n", p.step, p.lr, p.loss, p.smoothed);
  return out;
}

}  // namespace seqtrain
