// What a job will meet before it starts: see diagnose.h.
#include "obs/diagnose.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cpu/dnnl_context.h"
#include "backend/cuda_plugin.h"
#include "backend/precision.h"
#include "config/frequency.h"
#include "core/error.h"
#include "core/text.h"
#include "data/loader.h"
#include "models/registry.h"
#include "obs/machine.h"
#include "train/data_plan.h"
#include "train/trainer.h"

namespace seqtrain {
namespace fs = std::filesystem;

bool Diagnosis::has_error() const {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.error; });
}

RunEstimate estimate_run(const StepTiming& t, const Config& config) {
  RunEstimate e;
  if (t.timed_samples <= 0 || t.batches_per_epoch <= 0) return e;
  // Per sample, not per batch: an epoch's short last batch costs about its share, and the timed
  // batches may or may not have included one.
  const double sample_s = t.timed_s / static_cast<double>(t.timed_samples);
  e.epoch_train_s = sample_s * static_cast<double>(t.train_samples);
  // train.max_steps may end the run inside an epoch.
  const double epochs = std::min<double>(static_cast<double>(config.train.epochs),
                                         static_cast<double>(t.total_updates) / static_cast<double>(t.updates_per_epoch));
  e.validation_s = static_cast<double>(t.val_batches) * t.eval_batch_s;
  const Frequency every = parse_frequency(config.train.eval_every, "train.eval_every");
  if (t.val_batches > 0 && !every.never())
    e.validations = every.unit == Frequency::Unit::epochs
                        ? std::floor(epochs / static_cast<double>(every.every))
                        : std::floor(static_cast<double>(t.total_updates) / static_cast<double>(every.every));
  e.test_s = static_cast<double>(t.test_batches) * t.eval_batch_s;
  // The first batches size the arena and autotune: their time beyond a steady batch's, once a run.
  const double first = std::max(0.0, t.warmup_s - static_cast<double>(t.warmup_batches) * t.timed_s /
                                                      std::max<double>(1.0, static_cast<double>(t.timed_batches)));
  e.run_s = epochs * e.epoch_train_s + e.validations * e.validation_s + e.test_s + first;
  return e;
}

std::optional<Finding> check_workers(const std::string& workers, int64_t cores, int threads) {
  if (workers == "auto") return std::nullopt;
  const int64_t n = std::stoll(workers);
  const int64_t free_cores = std::max<int64_t>(0, cores - threads);
  if (n <= free_cores) return std::nullopt;
  return Finding{false,
                 fmt::format("data.workers = {} is above the {} free core{} ({} cores, {} compute thread{}): loader "
                             "threads would compete with the step's compute threads for cores",
                             n, free_cores, free_cores == 1 ? "" : "s", cores, threads, threads == 1 ? "" : "s"),
                 fmt::format("data.workers: auto (it counts the free cores and RAM){}, or lower runtime.threads",
                             free_cores > 0 ? fmt::format(", or at most {}", free_cores) : ", or 0")};
}

std::optional<Finding> check_memory(double need, double available, double activation_bytes, double checkpointed_bytes,
                                    const Config& config) {
  if (available <= 0 || need <= 0.8 * available) return std::nullopt;
  const bool over = need > available;
  const int64_t B = config.train.batch_size;
  // The batch that would fit: activations scale with it, the rest does not.
  const double rest = need - activation_bytes;
  const int64_t fits = activation_bytes > 0 && available * 0.8 > rest
                           ? std::max<int64_t>(1, static_cast<int64_t>((available * 0.8 - rest) / activation_bytes *
                                                                        static_cast<double>(B)))
                           : 0;
  std::string fix = fits > 0 && fits < B ? fmt::format("train.batch_size: {} or less", fits)
                                         : std::string("a smaller train.batch_size");
  if (!config.train.grad_checkpoint && checkpointed_bytes > 0 && checkpointed_bytes < 0.8 * activation_bytes)
    fix += fmt::format("; or train.grad_checkpoint: true (activations {} instead of {})", format_bytes(checkpointed_bytes),
                       format_bytes(activation_bytes));
  fix += "; or free memory";
  return Finding{over,
                 fmt::format("train.batch_size = {} needs about {} of RAM ({} of it activations) and {} is available{}",
                             B, format_bytes(need), format_bytes(activation_bytes), format_bytes(available),
                             over ? ": the run would swap or be killed" : ": little room is left"),
                 fix};
}

namespace {

std::string plural_es(int64_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "es"); }
std::string ms(double s) { return fmt::format("{:.1f} ms", s * 1e3); }
std::string secs(double s) { return fmt::format("{:.3g}", s); }

// What seqtrain holds of a split's source data, for the memory line: a series' table in
// memory; an npy or text source's files (npy arrays are mapped, text read whole).
double data_bytes(const DataPlan& plan) {
  if (plan.windows && plan.windows->table)
    return static_cast<double>(plan.windows->table->values.size() * sizeof(float) +
                               plan.windows->table->times.size() * sizeof(int64_t));
  double bytes = 0;
  std::error_code ec;
  for (const std::string& f : plan.files) {
    const auto n = fs::file_size(f, ec);
    if (!ec) bytes += static_cast<double>(n);
  }
  return bytes;
}

// Floats of state per parameter: the weights, their gradients, and the optimizer's moments.
int optimizer_copies(const Config& c) {
  if (c.train.optimizer.name == "adamw") return 4;
  return c.train.optimizer.momentum > 0 ? 3 : 2;
}

// The options diagnose's TrainLoops run under: no run directory is opened (time_steps never opens
// one), so overwrite only keeps the constructor from refusing a working directory that holds a
// run's config.yaml; quiet keeps the loop's log out of diagnose's report.
TrainOptions probe_options() { return TrainOptions("", /*resume_run=*/false, /*overwrite_run=*/true, /*quiet_run=*/true); }

// Activation bytes of one training batch of `batch` samples, with train.grad_checkpoint `ckpt`:
// the arena's high water (plus layer scratch) of one step.
double probe_activations(Config c, int64_t batch, bool ckpt) {
  c.train.batch_size = batch;
  c.train.grad_checkpoint = ckpt;
  c.train.eval_iters = 0;
  c.runtime.autotune = false;  // one step: the default kernels are what is sized
  c.data.workers = "0";
  TrainLoop loop(c, probe_options());
  return static_cast<double>(loop.time_steps(1, 0, 0).activation_bytes);
}

// A batch's activations at the configured batch B.
struct Activations {
  double bytes = 0;
  int64_t measured_at = 0;  // B: measured; less: the line through the measurements up to this batch, at B
};

// Activations at batch B, found without allocating more than `budget` bytes of them (0: no
// limit known): measured at a small batch first, then at doubling batches while the line through
// the last two measurements says the next fits, and at B itself once it says B fits. Why not
// scale one small batch: a step's fixed buffers and the kernels' batch-dependent layouts make
// small batches cost more per sample (LSTM 64x2: 16 samples 5.8 MiB, 256 samples 61 MiB).
Activations activations_at(const Config& c, int64_t B, bool ckpt, int64_t first, double budget) {
  std::vector<std::pair<double, double>> pts;  // (batch, bytes)
  int64_t b = std::min(B, first);
  for (;;) {
    pts.emplace_back(static_cast<double>(b), probe_activations(c, b, ckpt));
    if (b == B) return {pts.back().second, B};
    auto at = [&](double x) {
      const auto [b2, a2] = pts.back();
      if (pts.size() == 1) return a2 * x / b2;
      const auto [b1, a1] = pts[pts.size() - 2];
      return a2 + std::max(0.0, (a2 - a1) / (b2 - b1)) * (x - b2);
    };
    if (budget <= 0 || at(static_cast<double>(B)) <= budget) {
      b = B;
      continue;
    }
    const int64_t next = std::min(B, 2 * b);
    if (at(static_cast<double>(next)) > budget) return {at(static_cast<double>(B)), b};
    b = next;
  }
}

std::string activation_text(const Activations& a, int64_t B) {
  return a.measured_at == B ? fmt::format("{} a batch of {} (measured)", format_bytes(a.bytes), B)
                            : fmt::format("{} a batch of {} (estimated from batches up to {}: one this large was not "
                                          "allocated)", format_bytes(a.bytes), B, a.measured_at);
}

struct Collector {
  Diagnosis d;
  void error(const std::string& text, const std::string& fix = {}) { d.findings.push_back({true, text, fix}); }
  void warning(const std::string& text, const std::string& fix = {}) { d.findings.push_back({false, text, fix}); }
  Diagnosis::Section& section(const std::string& title) {
    d.sections.push_back({title, {}});
    return d.sections.back();
  }
};

void machine_section(Collector& c, const Machine& m) {
  auto& s = c.section("machine");
  s.lines = {{"cpu", m.cpu},
             {"kernels", m.isa},
             {"cores", std::to_string(m.cores)},
             {"ram", m.ram_total > 0 ? fmt::format("{} total, {} available", format_bytes(static_cast<double>(m.ram_total)),
                                                   format_bytes(static_cast<double>(m.ram_available)))
                                     : "unknown (/proc/meminfo unreadable)"},
             {"gpus", m.gpus > 0 ? fmt::format("{} ({})", m.gpus, m.gpu_note) : fmt::format("none ({})", m.gpu_note)}};
}

void data_section(Collector& c, const Config& config, const DataPlan& plan) {
  auto& s = c.section("data");
  s.lines.push_back({"source", plan.source});
  std::string files;
  for (const std::string& f : plan.files) files += (files.empty() ? "" : ", ") + f;
  s.lines.push_back({"files", files.empty() ? "none (generated)" : files});
  const int64_t B = config.train.batch_size;
  const char* names[] = {"train", "val", "test"};
  const std::shared_ptr<const BatchSource>* splits[] = {&plan.train, &plan.val, &plan.test};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = DataPlan::size_of(*splits[i]);
    std::string line = fmt::format("{} {} ({} of {})", n, plan.unit, plural_es(batch_count(n, B), "batch"), B);
    if (plan.windows) {
      const RowRange& r = plan.windows->splits[static_cast<size_t>(i)];
      line = fmt::format("{} rows [{}, {}): {}", r.size(), r.begin, r.end, line);
    } else if (plan.vocab > 0) {
      line += fmt::format(", {} tokens each", plan.steps);
    }
    s.lines.push_back({names[i], line});
  }
  s.lines.push_back({"sample", fmt::format("x [{}, {}], {} output{}", plan.steps, plan.features, plan.outputs,
                                           plan.outputs == 1 ? "" : "s")});
  s.lines.push_back({"memory", format_bytes(data_bytes(plan)) +
                                   (plan.windows ? " (the series' table)" : " (the source files, read or mapped)")});
}

// What the measurement runs: the job, less what would write or would fail for a reason already
// reported (then measured as close to the job as can be, and said so in `measured_as`).
Config probe_config(const Config& config, Collector& c, std::vector<std::string>& measured_as) {
  Config probe = config;
  if (!probe.data.cache.empty()) {
    probe.data.cache.clear();  // building a cache writes files; diagnose writes nothing
    measured_as.push_back("without data.cache");
  }
  try {
    backend_for(config.runtime.backend, config.runtime.device);
  } catch (const Error& e) {  // runtime.device names a GPU this machine lacks
    c.error(e.what());
    probe.runtime.device = "cpu";
    measured_as.push_back("on the CPU");
  }
  try {
    std::string why;
    resolve_precision(config.runtime.precision, backend_for(probe.runtime.backend, probe.runtime.device), &why);
  } catch (const Error& e) {
    c.error(e.what());
    probe.runtime.precision = "fp32";
    measured_as.push_back("runtime.precision fp32");
  }
  return probe;
}

// The step and estimate sections from the timed steps, and the loader warning they may show.
void timing_sections(Collector& c, const StepTiming& t, const Config& config, int64_t B,
                     const std::vector<std::string>& measured_as) {
  auto& step = c.section("step");
  const double step_s = t.timed_s / static_cast<double>(std::max<int64_t>(1, t.timed_batches));
  step.lines.push_back({"measured", fmt::format("{} training batches after {} warm-up ones, on {} with {} compute "
                                                "thread{} and {} loader worker{}{}",
                                                t.timed_batches, t.warmup_batches, t.backend, t.threads,
                                                t.threads == 1 ? "" : "s", t.workers, t.workers == 1 ? "" : "s",
                                                measured_as.empty() ? "" : " (" + fmt::format("{}", fmt::join(measured_as, ", ")) + ")")});
  step.lines.push_back({"step_s", fmt::format("{} ({} a batch of {}, of which {} waiting for data)", secs(step_s), ms(step_s),
                                              B, ms(t.data_wait_s / static_cast<double>(std::max<int64_t>(1, t.timed_batches))))});
  step.lines.push_back({"warmup_s", fmt::format("{} (the first {} batches: arena sizing{})", secs(t.warmup_s),
                                                t.warmup_batches, config.runtime.autotune ? ", kernel autotuning" : "")});
  if (t.eval_batch_s > 0) step.lines.push_back({"eval_batch_s", fmt::format("{} ({} a validation batch)", secs(t.eval_batch_s), ms(t.eval_batch_s))});

  const RunEstimate e = estimate_run(t, config);
  auto& est = c.section("estimate");
  est.lines.push_back({"epoch_train_s", fmt::format("{} ({} samples an epoch, {} batches; metrics.jsonl's epoch_train_s)",
                                                    secs(e.epoch_train_s), t.train_samples, t.batches_per_epoch)});
  est.lines.push_back({"validation_s", e.validations > 0
                                           ? fmt::format("{} (a pass of {}; {} over the run: train.eval_every {})",
                                                         secs(e.validation_s), plural_es(t.val_batches, "batch"),
                                                         plural_es(static_cast<int64_t>(e.validations), "pass"),
                                                         config.train.eval_every)
                                           : std::string("0 (no validation)")});
  est.lines.push_back({"test_s", secs(e.test_s)});
  est.lines.push_back({"run_s", fmt::format("{} ({} epochs{}; early stopping may end it sooner)", secs(e.run_s),
                                            config.train.epochs, config.train.max_steps > 0 ? fmt::format(
                                                ", at most {} optimizer steps", config.train.max_steps) : "")});

  if (t.timed_s > 0 && t.data_wait_s > 0.1 * t.timed_s)
    c.warning(fmt::format("the step waits for data {:.0f}% of its time: the loader cannot keep up",
                          100.0 * t.data_wait_s / t.timed_s),
              "raise data.workers (or auto), or set data.cache to build the samples once");
}

// The model section's memory lines: activations at the configured batch with and without
// train.grad_checkpoint (measured on small batches and extrapolated), and what the run needs in
// all, checked against the machine's free memory on a CPU. nullopt: stop (a finding says why).
struct MemoryPlan {
  int64_t batch = 1;       // the batch measured: the configured one, at most the training split
  size_t act_line = 0;     // model.lines' activation line, rewritten once the timed steps ran
};

std::optional<MemoryPlan> memory_lines(Collector& c, const Config& config, const Config& probe, const DataPlan& plan,
                                       const Machine& machine, int threads, double state_bytes,
                                       const DiagnoseOptions& o) {
  auto& model = c.section("model");
  std::string workers_reason;
  const int64_t workers = loader_workers(probe, threads, &workers_reason);
  // A batch holds at most the whole training split.
  const int64_t B = std::max<int64_t>(1, std::min(config.train.batch_size, plan.train->size()));
  // Each worker keeps data.prefetch batches ready, and the step holds one.
  const double loader_bytes = static_cast<double>(B) * 4.0 *
                              static_cast<double>(plan.train->x_size() + plan.train->y_size()) *
                              static_cast<double>(std::max<int64_t>(1, workers) * config.data.prefetch + 1);
  const double fixed = state_bytes + data_bytes(plan) + loader_bytes;
  // On a GPU the activations are in its memory, which is not probed: measured at B directly (a
  // GPU out of memory is an Error with its fix, reported below).
  const bool on_cpu = backend_for(probe.runtime.backend, probe.runtime.device).rfind("cuda", 0) != 0;
  // An eighth of the free RAM is what the probes may take (0: unknown, no limit; at least a byte,
  // so that data too large already keeps every probe at the small batch): a line through batches
  // that large predicts the configured one well, and the timed steps then measure it whenever
  // it fits.
  const double budget = on_cpu && machine.ram_available > 0
                            ? std::max(1.0, 0.125 * static_cast<double>(machine.ram_available) - fixed)
                            : 0;
  const bool ckpt = probe.train.grad_checkpoint;
  Activations act, other;  // with the config's train.grad_checkpoint, and with the other setting
  std::string other_note;
  try {
    act = activations_at(probe, B, ckpt, o.probe_batch, budget);
  } catch (const Error& e) {
    c.error(e.what());
    model.lines.push_back({"error", "a training step failed; nothing below it was measured"});
    return std::nullopt;
  }
  try {
    other = activations_at(probe, B, !ckpt, o.probe_batch, budget);
  } catch (const Error& e) {
    other_note = e.what();
  }
  const size_t act_line = model.lines.size();
  model.lines.push_back({"activations", ckpt && !other_note.empty() ? "not measured: " + other_note
                                                                    : activation_text(ckpt ? other : act, B)});
  model.lines.push_back({"activations with train.grad_checkpoint",
                         !ckpt && !other_note.empty() ? "not available: " + other_note
                                                      : activation_text(ckpt ? act : other, B)});
  const double need = act.bytes + fixed;
  model.lines.push_back({"memory needed", fmt::format("{} ({}activations; parameters and state, data, loader buffers){}",
                                                      format_bytes(need), on_cpu ? "" : "on the GPU: ",
                                                      on_cpu ? "" : "; the GPU's memory is not checked")});
  if (on_cpu) {
    if (auto f = check_memory(need, static_cast<double>(machine.ram_available), act.bytes,
                              ckpt || !other_note.empty() ? 0 : other.bytes, config)) {
      c.d.findings.push_back(*f);
      if (f->error) return std::nullopt;  // the measurement itself would not fit
    }
  }

  return MemoryPlan{B, act_line};
}

}  // namespace

Diagnosis diagnose(const std::string& config_path, const std::vector<std::string>& overrides,
                   const DiagnoseOptions& o) {
  Collector c;
  const Machine machine = probe_machine();
  machine_section(c, machine);
  Config config;
  try {
    config = load_config(config_path, overrides);
  } catch (const Error& e) {
    c.error(e.what());
    return c.d;
  }
  std::vector<std::string> measured_as;
  const Config probe = probe_config(config, c, measured_as);
  const int threads = set_cpu_threads(static_cast<int>(config.runtime.threads));
  if (auto f = check_workers(config.data.workers, machine.cores, threads)) c.d.findings.push_back(*f);

  DataPlan plan;
  try {
    plan = plan_data(probe);
  } catch (const Error& e) {
    c.error(e.what());
    c.section("data").lines.push_back({"error", "the data could not be read; nothing below it was measured"});
    return c.d;
  }
  data_section(c, config, plan);

  auto& model = c.section("model");
  ModelSpec spec;
  int64_t parameters = 0;
  try {
    spec = model_spec(probe, plan);
    parameters = static_cast<int64_t>(build_model(spec)->params().size());
  } catch (const Error& e) {
    c.error(e.what());
    model.lines.push_back({"error", "the model could not be built; nothing below it was measured"});
    return c.d;
  }
  const double state_bytes = static_cast<double>(parameters) * 4.0 * optimizer_copies(config);
  model.lines.push_back({"type", spec.type});
  model.lines.push_back({"parameters", fmt::format("{} ({} with gradients and {} state)", parameters,
                                                   format_bytes(state_bytes), config.train.optimizer.name)});

  const std::optional<MemoryPlan> mem = memory_lines(c, config, probe, plan, machine, threads, state_bytes, o);
  if (!mem) return c.d;
  const int64_t B = mem->batch;
  const bool ckpt = probe.train.grad_checkpoint;

  StepTiming t;
  try {
    TrainLoop loop(probe, probe_options());
    t = loop.time_steps(o.warmup, o.steps, o.eval_batches);
  } catch (const Error& e) {
    c.error(e.what());
    c.section("step").lines.push_back({"error", "the training steps failed; nothing below was measured"});
    return c.d;
  }
  // The configured batch has now run with the run's own kernels (autotune included).
  model.lines[mem->act_line + (ckpt ? 1 : 0)].second = activation_text({static_cast<double>(t.activation_bytes), B}, B);
  timing_sections(c, t, config, B, measured_as);
  return c.d;
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string out;
  for (const auto& s : d.sections) {
    out += s.title + ":\n";
    for (const auto& [k, v] : s.lines) out += "  " + k + ": " + v + "\n";
  }
  int errors = 0, warnings = 0;
  if (!d.findings.empty()) out += "findings:\n";
  for (const Finding& f : d.findings) {
    (f.error ? errors : warnings)++;
    out += fmt::format("  {}: {}\n", f.error ? "error" : "warning", f.text);
    if (!f.fix.empty()) out += "    fix: " + f.fix + "\n";
  }
  out += errors + warnings == 0 ? "diagnose: no problems found\n"
                                : fmt::format("diagnose: {} error{}, {} warning{}\n", errors, errors == 1 ? "" : "s",
                                              warnings, warnings == 1 ? "" : "s");
  return out;
}

}  // namespace seqtrain
