// The batch-size finder: see batch_finder.h.
#include "train/batch_finder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include "backend/autotune.h"
#include "backend/device_batch.h"
#include "config/scalar.h"
#include "core/text.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/window_dataset.h"
#include "optim/schedule.h"
#include "train/objective.h"
#include "train/run_parts.h"
#include "train/step.h"

namespace seqtrain {
namespace {
// The log's byte counts, to two decimals: close enough to compare candidates.
std::string bytes_text(double bytes) { return format_bytes(bytes, 2); }
}  // namespace
namespace {

constexpr double kKiB = 1024.0, kMiB = kKiB * 1024.0, kGiB = kMiB * 1024.0;
// Timing: a batch stops being timed after this many seconds of steps (at least kMinTimedSteps,
// at most kMaxTimedSteps), enough to see past a step's jitter without making the search long.
constexpr double kTimeEach = 0.25;
constexpr int64_t kMinTimedSteps = 2, kMaxTimedSteps = 30;
// A larger batch must beat the best so far by this factor to count as a gain; within it of the
// best, samples/s are the same to the timing.
constexpr double kGain = 1.05;

// A budget a user can paste into runtime.memory_limit, rounded up: "2.4MiB", "1.1GiB", "300KiB".
std::string limit_text(size_t bytes) {
  const double b = static_cast<double>(bytes);
  auto up = [](double v) { return std::ceil(v * 10.0) / 10.0; };
  if (b >= kGiB) return fmt::format("{}GiB", up(b / kGiB));
  if (b >= kMiB) return fmt::format("{}MiB", up(b / kMiB));
  return fmt::format("{}KiB", std::ceil(b / kKiB));
}

// A measured batch: the activation memory held (what fits or not) and used (what grows with the
// batch; the held memory adds the arena's chunk slack, which comes in steps).
struct Point {
  int64_t batch;
  size_t held, used;
};

// Activations held at `batch`, from the batches measured below it: the last one's held memory
// plus the growth of the used memory per sample (the slope of the last two; from one point, all
// its used memory counted as per-sample, an upper bound).
size_t predict_activations(const std::vector<Point>& points, int64_t batch) {
  const Point& last = points.back();
  double slope = double(last.used) / double(last.batch);
  if (points.size() >= 2) {
    const Point& before = points[points.size() - 2];
    slope = std::max(0.0, (double(last.used) - double(before.used)) / double(last.batch - before.batch));
  }
  return last.held + static_cast<size_t>(std::ceil(slope * double(batch - last.batch)));
}
}  // namespace

size_t BatchMemory::needed() const { return static_cast<size_t>(std::ceil(double(total()) * kBatchMemoryMargin)); }

namespace {

BatchMemory memory_at(const BatchSearch& s, size_t per_sample_buffer, int64_t batch, size_t activations) {
  return BatchMemory{.weights = s.weights, .optimizer = s.optimizer, .activations = activations,
                     .loader = static_cast<size_t>(s.loader_buffers) * per_sample_buffer * static_cast<size_t>(batch)};
}

// One sample, measured first: it always runs (nothing smaller exists to predict it from), and when
// it does not fit no batch does, which is an Error naming runtime.memory_limit and what it must hold.
BatchCandidate measure_one_sample(const BatchSearch& s, size_t& per_sample_buffer, std::vector<Point>& points) {
  const BatchMeasurement m = s.measure(1);
  per_sample_buffer = m.buffer_bytes;
  BatchCandidate c;
  c.batch = 1;
  c.memory = memory_at(s, per_sample_buffer, 1, m.activations);
  c.measured = true;
  c.fits = c.memory.needed() <= static_cast<size_t>(s.budget);
  const BatchMemory& mem = c.memory;
  ST_CHECK(c.fits,
           "runtime.memory_limit: the memory budget {} ({}) is below what training one sample needs: {} with the "
           "{:.0f}% margin (parameters and gradients {}, optimizer moments {}, activations {}, loader buffers {}). "
           "Set runtime.memory_limit to at least {} (or auto), or give train.batch_size a number",
           bytes_text(double(s.budget)), s.budget_why, bytes_text(double(mem.needed())),
           (kBatchMemoryMargin - 1) * 100, bytes_text(double(mem.weights)), bytes_text(double(mem.optimizer)),
           bytes_text(double(mem.activations)), bytes_text(double(mem.loader)), limit_text(mem.needed()));
  c.samples_per_s = m.samples_per_s;
  points.push_back({1, m.activations, m.used});
  return c;
}

// The smallest timed batch within kGain of the best samples/s, and the rule that says why.
void choose_batch(BatchChoice& out, double best, int64_t max_batch) {
  for (const BatchCandidate& c : out.candidates)
    if (c.fits && c.samples_per_s && *c.samples_per_s * kGain >= best) {
      out.batch = c.batch;
      break;
    }
  int64_t largest = 0, timed = 0, fastest = 0;
  for (const BatchCandidate& c : out.candidates) {
    if (c.fits) largest = c.batch;
    if (!c.samples_per_s) continue;
    ++timed;
    if (*c.samples_per_s == best) fastest = c.batch;
  }
  out.rule = fmt::format("the best samples/s of the {} timed batches{}; the largest that fits is {} ({})", timed,
                         out.batch == fastest ? "" : fmt::format(" (the smallest within {:.0f}% of batch {}'s best)",
                                                                 (kGain - 1) * 100, fastest),
                         largest, largest == max_batch ? "the training split's largest power of two" : "the budget's");
}

}  // namespace

BatchChoice search_batch_size(const BatchSearch& s) {
  BatchChoice out;
  out.budget = s.budget;
  out.budget_why = s.budget_why;
  std::vector<Point> points;  // the batches measured
  size_t per_sample_buffer = 0;
  out.candidates.push_back(measure_one_sample(s, per_sample_buffer, points));
  double best = *out.candidates[0].samples_per_s;
  int flat = 0;             // larger timed batches in a row that gained less than kGain
  bool timing = true;
  for (int64_t b = 2; b <= s.max_batch; b *= 2) {
    BatchCandidate c;
    c.batch = b;
    c.memory = memory_at(s, per_sample_buffer, b, predict_activations(points, b));
    c.fits = c.memory.needed() <= static_cast<size_t>(s.budget);
    if (!c.fits || !timing) {  // refused by the prediction, or fitting but past the throughput's plateau
      out.candidates.push_back(c);
      if (!c.fits) break;
      continue;
    }
    BatchMeasurement m;
    try {
      m = s.measure(b);
    } catch (const Error& e) {  // a device out of memory: as good as over the budget
      c.fits = false;
      c.failed = e.what();
      out.candidates.push_back(c);
      break;
    }
    c.measured = true;
    c.memory = memory_at(s, per_sample_buffer, b, m.activations);
    c.fits = c.memory.needed() <= static_cast<size_t>(s.budget);
    points.push_back({b, m.activations, m.used});
    if (!c.fits) {
      out.candidates.push_back(c);
      break;
    }
    c.samples_per_s = m.samples_per_s;
    flat = m.samples_per_s > best * kGain ? 0 : flat + 1;
    best = std::max(best, m.samples_per_s);
    if (flat >= 2) timing = false;
    out.candidates.push_back(c);
  }
  choose_batch(out, best, s.max_batch);
  return out;
}

std::vector<std::string> BatchChoice::lines() const {
  std::vector<std::string> out;
  out.push_back(fmt::format("batch_size auto: memory budget {} ({}); a batch must fit it with {:.0f}% to spare",
                            bytes_text(double(budget)), budget_why, (kBatchMemoryMargin - 1) * 100));
  if (!candidates.empty()) {
    const BatchMemory& m = candidates.front().memory;
    out.push_back(fmt::format("batch_size auto: every batch holds parameters and gradients {}, optimizer moments {}",
                              bytes_text(double(m.weights)), bytes_text(double(m.optimizer))));
  }
  for (const BatchCandidate& c : candidates) {
    std::string what = fmt::format("batch_size auto:   batch {}: {} {} (activations {}, loader {})", c.batch,
                                   bytes_text(double(c.memory.total())), c.measured ? "measured" : "estimated",
                                   bytes_text(double(c.memory.activations)), bytes_text(double(c.memory.loader)));
    if (!c.failed.empty()) what += ": refused, its step failed: " + c.failed;
    else if (!c.fits) what += fmt::format(": refused, over the budget with the margin ({})", bytes_text(double(c.memory.needed())));
    else if (c.samples_per_s) what += fmt::format(", {:.0f} samples/s", *c.samples_per_s);
    else what += ", fits; not timed (the samples/s had stopped growing)";
    out.push_back(what);
  }
  out.push_back(fmt::format("batch_size auto: train.batch_size = {}: {}", batch, rule));
  return out;
}

int64_t memory_budget(const std::string& limit, Backend& backend, std::string* why) {
  if (limit != "auto") {
    const auto bytes = parse_bytes(limit);
    ST_CHECK(bytes.has_value(), "runtime.memory_limit '{}' is no size: give bytes with a unit (512MiB, 8GiB) or auto",
             limit);
    if (why) *why = fmt::format("runtime.memory_limit {}{}", limit,
                                backend.host_accessible() ? "" : fmt::format(" of {}'s memory", backend.name()));
    return *bytes;
  }
  if (const size_t free = backend.device_free_bytes(); free > 0) {
    if (why) *why = fmt::format("runtime.memory_limit auto: the {} free on {}", bytes_text(double(free)), backend.name());
    return static_cast<int64_t>(free);
  }
  const int64_t available = system_available_ram();
  ST_CHECK(available > 0, "runtime.memory_limit auto: this machine's available memory cannot be read (/proc/meminfo "
           "MemAvailable); set runtime.memory_limit to a size such as 4GiB");
  if (why) *why = fmt::format("runtime.memory_limit auto: 80% of the {} available (MemAvailable)",
                              bytes_text(double(available)));
  return static_cast<int64_t>(double(available) * 0.8);
}

namespace {

size_t buffer_bytes(const BatchBuffers& b) {
  return (b.x_store.capacity() + b.y_store.capacity() + b.loss_mask.capacity()) * sizeof(float) +
         (b.x_ids.capacity() + b.y_ids.capacity() + b.lengths.capacity()) * sizeof(int64_t) + b.padding.capacity();
}

// The probe: the run's model, optimizer, objective and step options, built fresh (weights from
// the seed only: model.init_from would change no memory or speed) and trained on the run's first
// epoch's batches.
class Probe {
 public:
  explicit Probe(const BatchProbe& p)
      : p_(p),
        model_(build_run_model(p.config, p.spec, p.env, /*load_weights=*/false)),
        optimizer_(build_run_optimizer(p.config.train, *model_)),
        schedule_(make_schedule(ScheduleOptions{.name = "constant", .base_lr = p.config.train.optimizer.lr})),
        objective_(make_objective(p.config, p.plan)),
        layout_(sample_layout(p.plan, MaskDraw::per_epoch)),
        order_(epoch_order(static_cast<size_t>(p.train.size()), p.config.train.shuffle, p.config.seed, 0)) {}

  bool host_memory() const { return model_->params().backend().host_accessible(); }
  size_t weights() const { return 2 * model_->params().size() * sizeof(float); }
  // Every moment buffer is one float per parameter (optim/optimizer.h), allocated at the first
  // step: counted from the names, known before.
  size_t optimizer() const { return optimizer_->buffer_names().size() * model_->params().size() * sizeof(float); }

  // The train.freeze_encoder_epochs schedule is not applied: the epochs after it train every
  // tensor, and those must fit too.
  BatchMeasurement measure(int64_t batch) {
    Backend& backend = model_->params().backend();
    const int64_t n = p_.train.size();
    BatchBuffers buffers[2];
    Batch batches[2];
    std::vector<int64_t> idx[2];
    for (int k = 0; k < 2; ++k) {
      for (int64_t i = 0; i < batch; ++i) idx[k].push_back(order_[static_cast<size_t>((k * batch + i) % n)]);
      buffers[k].reserve(p_.train, batch);
      fill_batch(p_.train, layout_, idx[k], 0, buffers[k], batches[k]);
      batches[k].index = k;
    }
    BatchMeasurement m;
    m.buffer_bytes = buffer_bytes(buffers[0]) / static_cast<size_t>(batch);
    TrainStep step(*model_, *optimizer_, *schedule_,
                   run_step_options(p_.config.train, nullptr, nullptr, objective_.get()));
    step.run(batches[0], 1);  // the warm-up: sizes the arena, tunes the kernels, touches the pages
    step.take_loss();         // one read back: the device has finished
    const auto [eval_held, eval_used] = evaluation_bytes(batches[0], backend);
    m.activations = step.activation_capacity() + eval_held;
    m.used = step.activation_bytes() + eval_used;
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    int64_t steps = 0;
    do {
      step.run(batches[steps % 2], static_cast<uint64_t>(steps + 2));
      ++steps;
    } while (steps < kMinTimedSteps || (steps < kMaxTimedSteps && elapsed() < kTimeEach));
    step.take_loss();  // waits for the queued steps
    m.samples_per_s = double(steps * batch) / std::max(elapsed(), 1e-9);
    return m;
  }

 private:
  // A validation's arena at this batch: a forward in inference mode (forward_batches' way), which
  // the run holds beside the step's arena while it validates.
  // Held and used bytes, as BatchMeasurement counts them.
  std::pair<size_t, size_t> evaluation_bytes(const Batch& host, Backend& backend) {
    Arena arena(backend);
    StepContext ctx(arena);
    ctx.host_batch = &host;
    const Batch batch = device_batch(host, arena, backend);
    model_->forward(batch, ctx);
    return {arena.capacity() + ctx.scratch_bytes, arena.high_water() + ctx.scratch_bytes};
  }

  const BatchProbe& p_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Objective> objective_;
  SampleLayout layout_;
  std::vector<int64_t> order_;
};

}  // namespace

BatchChoice choose_auto_batch(const Config& config, const DataPlan& plan, const BatchSource& train,
                              const ModelSpec& spec, const Precision& precision, int64_t workers) {
  Backend& backend = backend_named(spec.backend);
  std::string budget_why;
  const int64_t budget = memory_budget(config.runtime.memory_limit, backend, &budget_why);
  return find_batch_size(BatchProbe{.config = config, .plan = plan, .train = train, .spec = spec,
                                    .env = ModelEnv{spec.autotune ? std::make_shared<Autotuner>() : nullptr, precision},
                                    .loader_slots = loader_slots(workers, config.data.prefetch)},
                         budget, budget_why);
}

BatchChoice find_batch_size(const BatchProbe& p, int64_t budget, const std::string& budget_why) {
  const int64_t n = p.train.size();
  ST_CHECK(n > 0, "train.batch_size: auto needs training samples, and the training split is empty");
  Probe probe(p);
  BatchSearch s;
  s.budget = budget;
  s.budget_why = budget_why;
  while (s.max_batch * 2 <= n) s.max_batch *= 2;
  s.weights = probe.weights();
  s.optimizer = probe.optimizer();
  // The loader's slots and the resume's replay buffer are host memory: a GPU's budget has none.
  s.loader_buffers = probe.host_memory() ? p.loader_slots + 1 : 0;
  s.measure = [&probe](int64_t batch) { return probe.measure(batch); };
  return search_batch_size(s);
}

}  // namespace seqtrain
