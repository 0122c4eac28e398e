#include "train/trainer.h"

#include "backend/cpu/autotune.h"
#include "backend/cpu/isa.h"

#include "data/augment.h"
#include "data/loader.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "backend/cpu/dnnl_context.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "nn/loss.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/resume.h"
#include "train/step.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
std::atomic<int> g_signal{0};         // the first stop signal a running train() received
std::atomic<bool> g_stop_armed{false};  // a train() loop is listening for stop signals

// Arms the stop flag for one train() call. Signals reach it only when the process called
// route_stop_signals(); otherwise they keep their default action.
class SignalGuard {
 public:
  SignalGuard() {
    g_signal.store(0);
    g_stop_armed.store(true);
  }
  ~SignalGuard() { g_stop_armed.store(false); }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
};

// An exclusive flock on <run>/.lock for the whole job. Two processes training into one run
// directory would overwrite each other's checkpoints, and crash recovery (which deletes
// unfinished .tmp-* writes) is only safe when no other writer exists. The kernel drops the
// lock when the process dies, kill -9 included, so a stale lock file never blocks anyone.
class RunLock {
 public:
  explicit RunLock(const fs::path& run) {
    const std::string path = (run / ".lock").string();
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ST_CHECK(fd_ >= 0, "cannot create '{}': {}; check that the run directory is writable", path, std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fail("another seqtrain process is training in '{}' (it holds the lock {}); wait for it to finish, stop it, "
           "or choose another --out",
           run.string(), path);
    }
  }
  ~RunLock() { ::close(fd_); }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

LossOptions loss_options(double huber_delta) {
  LossOptions o;
  o.huber_delta = static_cast<float>(huber_delta);
  return o;
}

// Mean squared error of predicting every horizon step as the window's last observed target
// value: the bar a forecaster must clear to be worth anything.
double last_value_baseline(const Dataset& data, const WindowDataset& split) {
  std::vector<int64_t> target_in_x;
  for (const auto& t : data.targets) {
    auto it = std::find(data.features.begin(), data.features.end(), t);
    if (it == data.features.end()) return 0.0;
    target_in_x.push_back(it - data.features.begin());
  }
  std::vector<float> x(split.x_size()), y(split.y_size());
  double sum = 0;
  int64_t count = 0;
  for (int64_t k = 0; k < split.size(); ++k) {
    split.fill_batch(k, 1, x.data(), y.data());
    for (int64_t h = 0; h < split.horizon(); ++h)
      for (size_t t = 0; t < target_in_x.size(); ++t) {
        double pred = x[(split.lookback() - 1) * split.n_features() + target_in_x[t]];
        double err = pred - y[h * target_in_x.size() + t];
        sum += err * err;
        ++count;
      }
  }
  return count ? sum / count : 0.0;
}

}  // namespace

void route_stop_signals() {
  // Why not a sigaction handler: oneDNN 2.6's JIT sgemm kernels point rsp into the heap while
  // they run (oneDNN issue #4845, fixed upstream in 2026), so a handler that interrupts one
  // pushes its frame onto the heap and corrupts it. Blocked signals are never delivered
  // asynchronously; the watcher thread takes them with sigwait on its own stack instead.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started from now on
  std::thread([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (g_stop_armed.load() && g_signal.exchange(sig) == 0) continue;  // train() stops after this step
      // No training is listening, or this is the second signal: end the process the way the
      // signal's default action would.
      ::signal(sig, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      ::raise(sig);
      ::_exit(128 + sig);
    }
  }).detach();
}

ModelSpec model_spec(const Config& c, const Dataset& data) {
  return spec_from_config(c, DataShape{data.n_features(), c.data.lookback, c.data.horizon * data.n_targets()});
}

ModelSpec model_spec(const Config& c, const DataPlan& plan) {
  return spec_from_config(c, DataShape{plan.features, plan.steps, plan.outputs, plan.vocab, plan.classes});
}

ModelSpec model_spec(const Config& c, int64_t input_size, int64_t lookback, int64_t output_size) {
  return spec_from_config(c, DataShape{input_size, lookback, output_size});
}

double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size) {
  if (split.empty()) return 0.0;
  return evaluate(model, WindowSource(split), split.lookback(), split.n_features(), 0, loss, huber_delta, batch_size);
}

void forward_batches(Model& model, const BatchSource& source, int64_t steps, int64_t features, int64_t batch_size,
                     const std::function<void(int64_t first, int64_t n, const Tensor& pred, float* y)>& use) {
  Arena arena;
  std::vector<float> x(batch_size * source.x_size()), y(batch_size * source.y_size());
  std::vector<int64_t> idx(batch_size);
  for (int64_t b = 0; b < source.size(); b += batch_size) {
    const int64_t n = std::min(batch_size, source.size() - b);
    for (int64_t i = 0; i < n; ++i) idx[i] = b + i;
    source.fill(std::span<const int64_t>(idx.data(), n), 0, x.data(), y.empty() ? nullptr : y.data());
    arena.reset();
    Tensor pred = model.forward(Tensor(x.data(), {n, steps, features}), arena, false);
    use(b, n, pred, y.empty() ? nullptr : y.data());
  }
}

double evaluate(Model& model, const BatchSource& split, int64_t steps, int64_t features, int64_t classes,
                const std::string& loss, double huber_delta, int64_t batch_size, double* accuracy) {
  if (split.size() == 0) return 0.0;
  const LossKind kind = parse_loss(loss);
  std::vector<int64_t> labels(classes > 0 ? batch_size * split.y_size() : 0);
  double sum = 0;
  int64_t correct = 0;
  forward_batches(model, split, steps, features, batch_size, [&](int64_t, int64_t n, const Tensor& pred, float* y) {
    Tensor target(y, {n, split.y_size()});
    if (classes > 0) {  // one label per sample ([n]) or per step ([n, T], next-token targets)
      const int64_t rows = n * split.y_size();
      for (int64_t i = 0; i < rows; ++i) labels[i] = static_cast<int64_t>(y[i]);
      target = split.y_size() == 1 ? Tensor(labels.data(), {n}, DType::i64)
                                   : Tensor(labels.data(), {n, split.y_size()}, DType::i64);
      const float* logits = pred.f32();
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = logits + i * classes;
        correct += std::max_element(row, row + classes) - row == labels[i];
      }
    }
    sum += n * static_cast<double>(loss_forward(kind, pred, target, loss_options(huber_delta)));
  });
  if (accuracy) *accuracy = static_cast<double>(correct) / static_cast<double>(split.size() * split.y_size());
  return sum / static_cast<double>(split.size());
}

TrainSummary train(const Config& config, const TrainOptions& opt) {
  const fs::path run(opt.out_dir);
  const fs::path ckpt_dir = run / "checkpoints";
  if (!opt.resume && fs::exists(run / "config.yaml") && !opt.overwrite)
    fail("output directory '{}' already holds a run; pass --resume to continue it or --overwrite to replace it",
         run.string());

  // Everything that can fail on bad input happens before the run directory is touched.
  const int threads = set_cpu_threads(static_cast<int>(config.runtime.threads));
  const DataPlan plan = plan_data(config);
  // Training batches: the train split -> augmentation (training only) -> the pre-augmentation
  // cache when data.cache is set (built here on a miss, before the run directory exists).
  std::string workers_reason;
  const int64_t workers = loader_workers(config, threads, &workers_reason);
  TrainFeed feed = training_feed(plan, config, workers);
  if (!opt.quiet) std::fprintf(stderr, "seqtrain: data: %s\n", plan.source.c_str());
  if (!opt.quiet && !feed.cache.path.empty()) std::fprintf(stderr, "seqtrain: %s\n", feed.cache.message.c_str());
  const BatchSource* train_source = feed.source;
  const ModelSpec spec = model_spec(config, plan);
  std::unique_ptr<Model> model = make_model(spec);
  Rng init_rng(config.seed, /*stream=*/1);
  model->init(init_rng);
  // Autotune decisions are cached per run directory (and machine: another CPU's file is ignored).
  const std::string autotune_path = (run / "autotune.json").string();
  bool autotune_saved = true;
  if (Autotuner* tuner = model->autotuner()) {
    autotune_saved = false;
    if (fs::exists(autotune_path)) {
      std::ifstream f(autotune_path);
      std::stringstream text;
      text << f.rdbuf();
      const int64_t n = tuner->import_json(text.str());
      if (!opt.quiet) std::fprintf(stderr, "seqtrain: autotune: %ld cached decision(s) from %s\n", (long)n, autotune_path.c_str());
    }
  }
  auto save_autotune = [&] {
    autotune_saved = true;
    Autotuner* tuner = model->autotuner();
    if (!tuner) return;
    write_file_atomic(autotune_path, tuner->export_json());
    if (!opt.quiet) {
      for (const auto& line : tuner->log_lines()) std::fprintf(stderr, "seqtrain: %s\n", line.c_str());
      std::fprintf(stderr, "seqtrain: autotune: %zu decision(s), %.0f ms spent timing candidates\n",
                   tuner->decisions().size(), tuner->tuning_ms());
    }
  };
  if (!config.model.init_from.empty()) {
    const std::string& from = config.model.init_from;
    if (fs::is_directory(from)) load_checkpoint(from, model->params());
    else load_params(from, model->params());
  }

  OptimizerOptions oo;
  oo.name = config.train.optimizer.name;
  oo.lr = config.train.optimizer.lr;
  oo.beta1 = config.train.optimizer.beta1;
  oo.beta2 = config.train.optimizer.beta2;
  oo.eps = config.train.optimizer.eps;
  oo.weight_decay = config.train.optimizer.weight_decay;
  oo.momentum = config.train.optimizer.momentum;
  oo.nesterov = config.train.optimizer.nesterov;
  auto optimizer = make_optimizer(oo);

  const int64_t B = config.train.batch_size;
  const int64_t batches = batch_count(train_source->size(), B);
  const int64_t updates_per_epoch = std::max<int64_t>(1, batches / config.train.grad_accum);
  int64_t total_updates = updates_per_epoch * config.train.epochs;
  if (config.train.max_steps > 0) total_updates = std::min(total_updates, config.train.max_steps);
  ScheduleOptions so;
  so.name = config.train.schedule.name;
  so.base_lr = config.train.optimizer.lr;
  so.step_size = config.train.schedule.step_size;
  so.gamma = config.train.schedule.gamma;
  so.warmup_steps = config.train.schedule.warmup_steps;
  so.total_steps = total_updates;
  so.min_lr = config.train.schedule.min_lr;
  so.factor = config.train.schedule.factor;
  so.patience = config.train.schedule.patience;
  auto schedule = make_schedule(so);

  // fp16 gradients need dynamic loss scaling (optim/loss_scaler.h); other precisions run without.
  std::unique_ptr<LossScaler> scaler;
  if (config.runtime.precision == "fp16") {
    const LossScaleConfig& ls = config.runtime.loss_scale;
    scaler = std::make_unique<LossScaler>(
        LossScalerOptions{ls.init, ls.growth_factor, ls.backoff_factor, ls.growth_interval});
  }
  TrainStep step(*model, *optimizer, *schedule,
                 StepOptions{parse_loss(config.train.loss), loss_options(config.train.huber_delta),
                             config.train.grad_clip, config.train.grad_accum, scaler.get()});

  // The run directory: lock it, clear it for --overwrite, tidy what a crash left behind.
  fs::create_directories(run);
  RunLock lock(run);
  if (opt.overwrite && !opt.resume)
    for (const auto& e : fs::directory_iterator(run))
      if (e.path().filename() != ".lock") fs::remove_all(e.path());
  fs::create_directories(ckpt_dir);
  for (const auto& note : recover_checkpoints(ckpt_dir.string()))
    if (!opt.quiet) std::fprintf(stderr, "seqtrain: %s\n", note.c_str());

  // Where the run stands; all of it goes into state.json.
  int64_t epoch = 0, batch_in_epoch = 0, micro_steps = 0, bad_validations = 0;
  double best_val = std::numeric_limits<double>::infinity();
  double elapsed_before = 0;
  // Train losses taken out of the step's accumulator when a checkpoint was written but not yet
  // logged; saved with the checkpoint so a record spanning a resume still averages every batch.
  double pending_loss_sum = 0;
  int64_t pending_loss_count = 0;
  std::string resumed_from;  // the step checkpoint a resumed run started from: never pruned

  const std::vector<ResumeCandidate> candidates =
      opt.resume ? resume_candidates(ckpt_dir) : std::vector<ResumeCandidate>{};
  const bool resuming = !candidates.empty();
  if (opt.resume && !resuming)
    std::fprintf(stderr, "seqtrain: '%s' has no checkpoint yet; starting the run from the beginning\n", run.c_str());
  if (resuming) {
    OptimizerState os;
    const ResumeCandidate* chosen = nullptr;
    nlohmann::json st;
    for (const auto& c : candidates) {
      check_resume_config(c.state, config, run, c.dir, opt.quiet);
      try {
        st = load_checkpoint(c.dir, model->params(), &os);
        chosen = &c;
        break;
      } catch (const Error& e) {
        std::fprintf(stderr, "seqtrain: warning: skipping checkpoint '%s': %s\n", c.dir.c_str(), e.what());
      }
    }
    ST_CHECK(chosen, "no checkpoint in '{}' can be loaded (see the warnings above); start the run again with "
             "--overwrite", ckpt_dir.string());
    ST_CHECK(!st.contains("normalizer") || st.at("normalizer") == plan.normalizer,
             "{}: the training data changed since checkpoint '{}' was written (its normalization statistics "
             "differ); restore the data (data.path / data.synthetic.*) or start a new run",
             (run / "config.yaml").string(), chosen->dir);
    ST_CHECK(!st.contains("vocab") || st.at("vocab") == plan.vocab_json,
             "{}: the text's vocabulary changed since checkpoint '{}' was written; restore data.path or start a "
             "new run", (run / "config.yaml").string(), chosen->dir);
    optimizer->load_state(os);
    schedule->load_state(schedule_state_from_json(st.at("schedule")));
    epoch = st.at("epoch");
    batch_in_epoch = st.at("batch_in_epoch");
    micro_steps = st.at("micro_steps");
    bad_validations = st.at("bad_validations");
    best_val = st.at("best_val").is_null() ? best_val : st.at("best_val").get<double>();
    elapsed_before = st.value("time_s", 0.0);
    pending_loss_sum = st.value("pending_loss_sum", 0.0);
    pending_loss_count = st.value("pending_loss_count", int64_t{0});
    step.set_updates(st.at("updates"));
    if (scaler && st.contains("loss_scaler")) scaler->load_json(st.at("loss_scaler"));
    const std::string tag = st.value("tag", std::string());
    if (tag.rfind("step-", 0) == 0) resumed_from = tag;
    const int64_t saved_threads = st.value("threads", int64_t{0});
    if (config.runtime.deterministic && saved_threads > 0 && saved_threads != threads)
      std::fprintf(stderr, "seqtrain: warning: the run used %ld threads and now uses %d; runtime.deterministic "
                   "promises bit-identical results only for the same thread count\n", (long)saved_threads, threads);
    // Records written after this checkpoint are written again by the resumed run.
    if (st.contains("metrics_bytes")) truncate_metrics((run / "metrics.jsonl").string(), st.at("metrics_bytes"));
    std::fprintf(stderr, "seqtrain: resuming '%s' from %s at epoch %ld, batch %ld (step %ld)\n", run.c_str(),
                 fs::path(chosen->dir).filename().c_str(), (long)epoch, (long)batch_in_epoch, (long)step.updates());
  }
  // config.yaml always holds the config the run continues with (a resume may extend epochs).
  {
    const std::string yaml = to_yaml(config);
    std::ifstream cur(run / "config.yaml", std::ios::binary);
    std::stringstream ss;
    ss << cur.rdbuf();
    if (ss.str() != yaml) write_file_atomic((run / "config.yaml").string(), yaml);
  }
  if (!resuming) fs::remove(run / "metrics.jsonl");

  Loader loader(*train_source, LoaderOptions{.workers = workers, .prefetch = config.data.prefetch, .batch_size = B,
                                             .shuffle = config.train.shuffle, .seed = config.seed});
  if (!opt.quiet)
    std::fprintf(stderr, "seqtrain: loader: %ld worker(s) (%s); %d compute thread(s)%s\n", (long)workers,
                 workers_reason.c_str(), threads, feed.augment ? "; augmentation on" : "");

  const int64_t lookback = plan.steps, n_feat = plan.features, y_size = train_source->y_size();
  std::vector<int64_t> labels(plan.classes > 0 ? B * y_size : 0);  // class labels as the loss takes them
  auto run_batch = [&](const float* x, const float* y, int64_t n, int64_t micro) {
    return step.run(Tensor(const_cast<float*>(x), {n, lookback, n_feat}), target_tensor(plan, y, n, labels),
                    mix_seed(config.seed, static_cast<uint64_t>(micro)));
  };
  // One micro-batch outside the loader (the resume replay below): batch `b` of epoch `e`.
  std::vector<float> x(B * train_source->x_size()), y(B * y_size);
  auto run_micro = [&](int64_t e, int64_t b, int64_t micro) {
    const auto order = epoch_order(train_source->size(), config.train.shuffle, config.seed, e);
    const int64_t begin = b * B, n = std::min(B, train_source->size() - begin);
    train_source->fill(std::span<const int64_t>(order.data() + begin, n), e, x.data(), y.data());
    return run_batch(x.data(), y.data(), n, micro);
  };

  // A checkpoint can fall inside a gradient accumulation (at an epoch's end or on a signal).
  // The weights have not changed since that optimizer step began, so re-running its first
  // micro-batches rebuilds the accumulated gradient exactly. Their losses are already in the
  // saved pending_loss, so the step's copy of them is dropped.
  if (resuming && micro_steps % config.train.grad_accum != 0) {
    const int64_t m = micro_steps % config.train.grad_accum;
    std::vector<std::pair<int64_t, int64_t>> where;  // (epoch, batch) of each, newest first
    for (int64_t e = epoch, b = batch_in_epoch; static_cast<int64_t>(where.size()) < m;) {
      if (b == 0) { --e; b = batches; }
      where.emplace_back(e, --b);
    }
    std::reverse(where.begin(), where.end());
    for (int64_t i = 0; i < m; ++i) {
      ST_CHECK(!run_micro(where[i].first, where[i].second, micro_steps - m + i).updated,
               "internal error: replaying a partial gradient accumulation completed an optimizer step");
    }
    step.take_loss();
  }

  MetricsLog metrics((run / "metrics.jsonl").string());
  CheckpointWriter writer;
  // Moves the step's unlogged train losses into pending_loss, so a checkpoint carries them.
  auto hold_losses = [&] {
    int64_t count = 0;
    const double mean = step.take_loss(&count);
    pending_loss_sum += mean * static_cast<double>(count);
    pending_loss_count += count;
  };
  // The mean train loss since the previous train record.
  auto take_logged_loss = [&] {
    int64_t count = 0;
    double mean = step.take_loss(&count);
    if (pending_loss_count > 0)
      mean = (pending_loss_sum + mean * static_cast<double>(count)) / static_cast<double>(pending_loss_count + count);
    pending_loss_sum = 0;
    pending_loss_count = 0;
    return mean;
  };
  const auto start = Clock::now();
  auto time_s = [&] { return elapsed_before + seconds_since(start); };
  // state.json for a checkpoint `tag` that continues at (next_epoch, next_batch).
  auto state_json = [&](const std::string& tag, int64_t next_epoch, int64_t next_batch) {
    hold_losses();
    nlohmann::json st;
    st["tag"] = tag;
    st["epoch"] = next_epoch;
    st["batch_in_epoch"] = next_batch;
    st["micro_steps"] = micro_steps;
    st["updates"] = step.updates();
    st["bad_validations"] = bad_validations;
    st["best_val"] = std::isfinite(best_val) ? nlohmann::json(best_val) : nlohmann::json();
    st["seed"] = config.seed;
    st["threads"] = threads;
    st["cpu_isa"] = isa_name(active_isa());  // the kernels' level (backend/cpu/isa.h)
    st["time_s"] = time_s();
    st["pending_loss_sum"] = pending_loss_sum;
    st["pending_loss_count"] = pending_loss_count;
    st["metrics_bytes"] = metrics.bytes();
    st["config_hash"] = config_hash(config);
    st["config"] = to_yaml(config);
    st["normalizer"] = plan.normalizer;
    st["io"] = model_io_json(plan);
    if (!plan.vocab_json.is_null()) st["vocab"] = plan.vocab_json;
    st["features"] = plan.windows ? plan.windows->features : std::vector<std::string>{};
    st["targets"] = plan.windows ? plan.windows->targets : std::vector<std::string>{};
    st["schedule"] = schedule_state_to_json(schedule->state());
    if (scaler) st["loss_scaler"] = scaler->to_json();
    return st;
  };
  // Time the training loop spends on checkpoints: the snapshot copy and any wait for the
  // previous background write (the write itself overlaps training).
  double checkpoint_block_s = 0;
  // A periodic checkpoint: step-<N>, then `last` as its hard links, then pruning.
  auto submit_step = [&](int64_t next_epoch, int64_t next_batch) {
    const auto t0 = Clock::now();
    const std::string tag = step_tag(step.updates());
    writer.submit(WriteJob{(ckpt_dir / tag).string(), (ckpt_dir / "last").string(), ckpt_dir.string(),
                           config.train.keep_last, resumed_from},
                  model->params(), optimizer->state(), state_json(tag, next_epoch, next_batch));
    checkpoint_block_s += seconds_since(t0);
  };
  auto submit_tag = [&](const std::string& tag, int64_t next_epoch, int64_t next_batch) {
    const auto t0 = Clock::now();
    WriteJob job;
    job.dir = (ckpt_dir / tag).string();
    writer.submit(std::move(job), model->params(), optimizer->state(),
                  state_json(tag, next_epoch, next_batch));
    checkpoint_block_s += seconds_since(t0);
  };

  SignalGuard signals;
  TrainSummary summary;
  if (plan.windows) summary.baseline_val = last_value_baseline(*plan.windows, plan.windows->val);
  const bool tty = !opt.quiet && isatty(fileno(stderr));
  if (!opt.quiet)
    std::fprintf(stderr, "seqtrain: %s model, %zu parameters, %ld train / %ld val / %ld test %s, %d threads\n",
                 spec.type.c_str(), model->params().size(), (long)plan.train->size(), (long)DataPlan::size_of(plan.val),
                 (long)DataPlan::size_of(plan.test), plan.unit, threads);
  if (!opt.quiet) std::fprintf(stderr, "seqtrain: CPU kernels: %s\n", isa_summary().c_str());
  if (!opt.quiet) {
    if (!model->precision_note().empty())
      std::fprintf(stderr, "seqtrain: %s\n", model->precision_note().c_str());
    else if (config.runtime.precision != "fp32")
      std::fprintf(stderr, "seqtrain: the %s model runs in fp32 (mixed precision covers the RNN layers)\n",
                   spec.type.c_str());
  }

  auto log_start = Clock::now();
  int64_t log_samples = 0;
  summary.stopped_by = "epochs";
  bool stop = false;
  bool last_is_current = false;  // `last` already holds the present state (no step since)
  for (; epoch < config.train.epochs && !stop; ++epoch, batch_in_epoch = 0) {
    const auto epoch_start = Clock::now();
    loader.start_epoch(epoch, batch_in_epoch);
    loader.reset_wait();
    while (batch_in_epoch < batches) {
      const Batch* batch = loader.next();
      ST_CHECK(batch != nullptr, "the data loader ended epoch {} early at batch {}", epoch, batch_in_epoch);
      StepResult r = run_batch(batch->x, batch->y, batch->count, micro_steps);
      if (!autotune_saved) save_autotune();
      log_samples += batch->count;
      loader.release(batch);
      ++micro_steps;
      ++batch_in_epoch;
      last_is_current = false;
      if (r.updated && step.updates() % config.train.log_every == 0) {
        const double secs = seconds_since(log_start);
        const double loss = take_logged_loss();
        nlohmann::json rec{{"split", "train"}, {"step", step.updates()}, {"epoch", epoch}, {"loss", loss}, {"lr", r.lr},
                           {"grad_norm", r.grad_norm}, {"samples_per_s", log_samples / std::max(secs, 1e-9)},
                           {"time_s", time_s()}};
        if (scaler) {
          rec["loss_scale"] = scaler->scale();
          rec["skipped_steps"] = scaler->take_skipped_since_report();
        }
        metrics.write(rec);
        if (!opt.quiet) {
          const double frac = double(step.updates()) / double(std::max<int64_t>(1, total_updates));
          const double eta = frac > 0 ? time_s() * (1 - frac) / frac : 0;
          std::fprintf(stderr, "%sepoch %ld step %ld loss %.5f lr %.2e %.0f samples/s ETA %.0fs%s", tty ? "\r" : "",
                       (long)epoch, (long)step.updates(), loss, r.lr, log_samples / std::max(secs, 1e-9), eta,
                       tty ? "   " : "\n");
        }
        log_start = Clock::now();
        log_samples = 0;
      }
      if (r.updated && config.train.checkpoint_every > 0 && step.updates() % config.train.checkpoint_every == 0) {
        submit_step(epoch, batch_in_epoch);
        last_is_current = true;
      }
      if (config.train.max_steps > 0 && step.updates() >= config.train.max_steps) {
        summary.stopped_by = "max_steps";
        stop = true;
      }
      if (g_signal.load()) {
        summary.stopped_by = "signal";
        stop = true;
      }
      if (stop) break;
    }
    if (summary.stopped_by == "signal") {
      if (!last_is_current) submit_tag("last", epoch, batch_in_epoch);
      break;
    }
    // Time the step spent waiting for data, and its share of the epoch's training time.
    const double epoch_secs = seconds_since(epoch_start), wait = loader.wait_seconds();
    metrics.write({{"split", "data"}, {"step", step.updates()}, {"epoch", epoch}, {"loss", nullptr}, {"lr", nullptr},
                   {"samples_per_s", nullptr}, {"data_wait_s", wait},
                   {"data_wait_share", wait / std::max(epoch_secs, 1e-9)}, {"epoch_train_s", epoch_secs},
                   {"time_s", time_s()}});
    if (!opt.quiet)
      std::fprintf(stderr, "%sepoch %ld trained in %.2fs, data wait %.3fs (%.2f%%)\n", tty ? "\n" : "", (long)epoch,
                   epoch_secs, wait, 100.0 * wait / std::max(epoch_secs, 1e-9));
    // Validation, inside every epoch.
    if (plan.val) {
      double accuracy = 0;
      const double val = evaluate(*model, *plan.val, plan.steps, plan.features, plan.classes, config.train.loss,
                                  config.train.huber_delta, B, &accuracy);
      if (tty) std::fputc('\n', stderr);
      nlohmann::json rec = {{"split", "val"}, {"step", step.updates()}, {"epoch", epoch}, {"loss", val},
                            {"lr", schedule->lr(step.updates())}, {"samples_per_s", nullptr}, {"time_s", time_s()}};
      // The baseline needs the target among the inputs: windowed forecasting only.
      if (summary.baseline_val) rec["baseline_last_value"] = *summary.baseline_val;
      if (plan.classes > 0) rec["accuracy"] = accuracy;
      metrics.write(rec);
      if (!opt.quiet && plan.windows)
        std::fprintf(stderr, "epoch %ld val loss %.5f (best %.5f, last-value baseline %.5f)\n", (long)epoch, val,
                     std::isfinite(best_val) ? std::min(best_val, val) : val, *summary.baseline_val);
      else if (!opt.quiet)
        std::fprintf(stderr, "epoch %ld val loss %.5f (best %.5f)%s\n", (long)epoch, val,
                     std::isfinite(best_val) ? std::min(best_val, val) : val,
                     plan.classes > 0 ? fmt::format(", accuracy {:.4f}", accuracy).c_str() : "");
      schedule->observe(val);
      if (val < best_val - config.train.early_stopping.min_delta) {
        best_val = val;
        bad_validations = 0;
        submit_tag("best", epoch, batch_in_epoch);
      } else if (++bad_validations >= config.train.early_stopping.patience && config.train.early_stopping.patience > 0) {
        summary.stopped_by = "early_stopping";
        stop = true;
      }
    }
    // The epoch's checkpoint continues at the next epoch when this one is complete.
    const bool epoch_done = batch_in_epoch >= batches;
    const int64_t next_epoch = epoch_done ? epoch + 1 : epoch, next_batch = epoch_done ? 0 : batch_in_epoch;
    if (config.train.checkpoint_every == 0) submit_step(next_epoch, next_batch);
    else submit_tag("last", next_epoch, next_batch);
    if (!stop && g_signal.load()) {  // a signal during validation: `last` is already current
      summary.stopped_by = "signal";
      epoch = next_epoch;
      batch_in_epoch = next_batch;
      break;
    }
  }
  {
    const auto t0 = Clock::now();
    writer.wait();
    checkpoint_block_s += seconds_since(t0);
  }
  summary.checkpoint_block_s = checkpoint_block_s;
  summary.epochs = epoch;
  summary.steps = step.updates();
  summary.skipped_steps = scaler ? scaler->skipped_total() : 0;
  summary.signal = summary.stopped_by == "signal" ? g_signal.load() : 0;
  if (!plan.val && summary.stopped_by != "signal") {
    submit_tag("best", epoch, batch_in_epoch);
    writer.wait();
  }
  summary.best_val = best_val;
  if (summary.stopped_by != "signal") {
    // Final test evaluation with the best validated weights.
    load_checkpoint((ckpt_dir / "best").string(), model->params());
    double accuracy = 0;
    if (plan.test) {
      summary.test_loss = evaluate(*model, *plan.test, plan.steps, plan.features, plan.classes, config.train.loss,
                                   config.train.huber_delta, B, &accuracy);
      if (plan.classes > 0) summary.test_accuracy = accuracy;
      nlohmann::json rec = {{"split", "test"}, {"step", summary.steps}, {"epoch", summary.epochs},
                            {"loss", *summary.test_loss}, {"lr", nullptr}, {"samples_per_s", nullptr},
                            {"time_s", time_s()}};
      if (plan.classes > 0) rec["accuracy"] = accuracy;
      metrics.write(rec);
    }
  }
  if (summary.stopped_by == "signal")
    std::fprintf(stderr, "seqtrain: stopped by signal %d after step %ld; checkpoints/last holds it. Continue with: "
                 "seqtrain train --resume %s\n", summary.signal, (long)summary.steps, run.c_str());
  else if (!opt.quiet)
    std::fprintf(stderr, "seqtrain: stopped by %s after %ld steps%s; best val loss %.5f, %s, %.1fs\n",
                 summary.stopped_by.c_str(), (long)summary.steps,
                 scaler ? fmt::format(" ({} skipped on fp16 overflow, loss scale {})", summary.skipped_steps,
                                      scaler->scale()).c_str() : "",
                 best_val,
                 summary.test_loss ? fmt::format("test loss {:.5f}", *summary.test_loss).c_str() : "no test split",
                 time_s());
  return summary;
}

}  // namespace seqtrain
