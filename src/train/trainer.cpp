#include "train/trainer.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "backend/cpu/dnnl_context.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/step.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

LossOptions loss_options(double huber_delta) {
  LossOptions o;
  o.huber_delta = static_cast<float>(huber_delta);
  return o;
}

// Writes checkpoints from snapshots on one background thread, one at a time, so the training
// loop only pays for a memory copy.
class CheckpointWriter {
 public:
  ~CheckpointWriter() { wait(); }
  void submit(std::string dir, const ParamStore& params, OptimizerState opt, nlohmann::json state) {
    wait();
    snapshot_ = std::make_unique<ParamStore>();
    for (const auto& e : params.entries()) snapshot_->add(e.name, e.shape);
    snapshot_->finalize();
    std::copy(params.params(), params.params() + params.size(), snapshot_->params());
    opt_ = std::move(opt);
    thread_ = std::thread([this, dir = std::move(dir), state = std::move(state)] {
      try {
        save_checkpoint(dir, CheckpointData{snapshot_.get(), opt_, state});
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    });
  }
  void wait() {
    if (thread_.joinable()) thread_.join();
    if (!error_.empty()) {
      std::string e = std::move(error_);
      error_.clear();
      fail("writing a checkpoint failed: {}", e);
    }
  }

 private:
  std::unique_ptr<ParamStore> snapshot_;
  OptimizerState opt_;
  std::thread thread_;
  std::string error_;
};

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

ModelSpec model_spec(const Config& c, const Dataset& data) {
  ModelSpec s;
  s.type = c.model.type;
  s.input_size = data.n_features();
  s.lookback = c.data.lookback;
  s.hidden = c.model.hidden;
  s.layers = c.model.layers;
  s.bidirectional = c.model.bidirectional;
  s.dropout = static_cast<float>(c.model.dropout);
  s.output_size = c.data.horizon * data.n_targets();
  s.rnn_impl = c.runtime.rnn_impl;
  return s;
}

double evaluate(Model& model, const WindowDataset& split, const std::string& loss, double huber_delta,
                int64_t batch_size) {
  if (split.empty()) return 0.0;
  const LossKind kind = parse_loss(loss);
  Arena arena;
  std::vector<float> x(batch_size * split.x_size()), y(batch_size * split.y_size());
  double sum = 0;
  for (int64_t b = 0; b < split.size(); b += batch_size) {
    const int64_t n = std::min(batch_size, split.size() - b);
    split.fill_batch(b, n, x.data(), y.data());
    arena.reset();
    Tensor pred = model.forward(Tensor(x.data(), {n, split.lookback(), split.n_features()}), arena, false);
    sum += n * static_cast<double>(loss_forward(kind, pred, Tensor(y.data(), {n, split.y_size()}), loss_options(huber_delta)));
  }
  return sum / static_cast<double>(split.size());
}

TrainSummary train(const Config& config, const TrainOptions& opt) {
  const fs::path run(opt.out_dir);
  const fs::path ckpt_dir = run / "checkpoints";
  const bool resuming = opt.resume && fs::exists(ckpt_dir / "last" / "state.json");
  if (!opt.resume && fs::exists(run / "config.yaml") && !opt.overwrite)
    fail("output directory '{}' already holds a run; pass --resume to continue it or --overwrite to replace it",
         run.string());
  if (opt.overwrite && !opt.resume) fs::remove_all(run);
  fs::create_directories(ckpt_dir);
  if (opt.resume && !resuming)
    std::fprintf(stderr, "seqtrain: '%s' has no checkpoint yet; starting the run from the beginning\n", run.c_str());
  if (!resuming) {
    write_file_atomic((run / "config.yaml").string(), to_yaml(config));
    fs::remove(run / "metrics.jsonl");
  }

  // Mixed precision is not implemented yet: refuse it rather than silently run fp32.
  ST_CHECK(config.runtime.precision == "fp32" || config.runtime.precision == "auto",
           "runtime.precision: {} compute is not implemented yet in this build; use fp32 (or auto, which runs fp32)",
           config.runtime.precision);
  const int threads = set_cpu_threads(static_cast<int>(config.runtime.threads));
  Dataset data = load_dataset(config);
  ST_CHECK(!data.train.empty(), "data.split leaves no training window; raise the train fraction");
  const ModelSpec spec = model_spec(config, data);
  std::unique_ptr<Model> model = make_model(spec);
  Rng init_rng(config.seed, /*stream=*/1);
  model->init(init_rng);
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
  const int64_t batches = batch_count(data.train.size(), B);
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

  TrainStep step(*model, *optimizer, *schedule,
                 StepOptions{parse_loss(config.train.loss), loss_options(config.train.huber_delta),
                             config.train.grad_clip, config.train.grad_accum});

  // Where the run stands; all of it goes into state.json.
  int64_t epoch = 0, batch_in_epoch = 0, micro_steps = 0, bad_validations = 0;
  double best_val = std::numeric_limits<double>::infinity();
  double elapsed_before = 0;
  if (resuming) {
    OptimizerState os;
    nlohmann::json st = load_checkpoint((ckpt_dir / "last").string(), model->params(), &os);
    ST_CHECK(st.value("config_hash", "") == config_hash(config),
             "{}: the run's config.yaml changed since this checkpoint was written; restore it or start a new run",
             (run / "config.yaml").string());
    optimizer->load_state(os);
    schedule->load_state(schedule_state_from_json(st.at("schedule")));
    epoch = st.at("epoch");
    batch_in_epoch = st.at("batch_in_epoch");
    micro_steps = st.at("micro_steps");
    bad_validations = st.at("bad_validations");
    best_val = st.at("best_val").is_null() ? best_val : st.at("best_val").get<double>();
    elapsed_before = st.value("time_s", 0.0);
    step.set_updates(st.at("updates"));
    std::fprintf(stderr, "seqtrain: resuming '%s' at epoch %ld, batch %ld (step %ld)\n", run.c_str(), (long)epoch,
                 (long)batch_in_epoch, (long)step.updates());
  }

  MetricsLog metrics((run / "metrics.jsonl").string());
  CheckpointWriter writer;
  auto state_json = [&](bool include_best) {
    nlohmann::json st;
    st["epoch"] = epoch;
    st["batch_in_epoch"] = batch_in_epoch;
    st["micro_steps"] = micro_steps;
    st["updates"] = step.updates();
    st["bad_validations"] = bad_validations;
    st["best_val"] = std::isfinite(best_val) ? nlohmann::json(best_val) : nlohmann::json();
    st["seed"] = config.seed;
    st["config_hash"] = config_hash(config);
    st["config"] = to_yaml(config);
    st["normalizer"] = data.normalizer.to_json();
    st["features"] = data.features;
    st["targets"] = data.targets;
    st["schedule"] = schedule_state_to_json(schedule->state());
    (void)include_best;
    return st;
  };

  g_signal.store(0);
  auto old_int = std::signal(SIGINT, on_signal);
  auto old_term = std::signal(SIGTERM, on_signal);
  struct Restore {
    void (*i)(int); void (*t)(int);
    ~Restore() { std::signal(SIGINT, i); std::signal(SIGTERM, t); }
  } restore{old_int, old_term};

  TrainSummary summary;
  summary.baseline_val = last_value_baseline(data, data.val);
  const auto start = Clock::now();
  auto time_s = [&] { return elapsed_before + seconds_since(start); };
  const bool tty = !opt.quiet && isatty(fileno(stderr));
  if (!opt.quiet)
    std::fprintf(stderr, "seqtrain: %s model, %zu parameters, %ld train / %ld val / %ld test windows, %d threads\n",
                 spec.type.c_str(), model->params().size(), (long)data.train.size(), (long)data.val.size(),
                 (long)data.test.size(), threads);
  if (!opt.quiet && config.runtime.precision == "auto")
    std::fprintf(stderr, "seqtrain: precision auto -> fp32 (mixed precision is not implemented yet)\n");

  std::vector<float> x(B * data.train.x_size()), y(B * data.train.y_size());
  auto log_start = Clock::now();
  int64_t log_samples = 0;
  summary.stopped_by = "epochs";
  bool stop = false;
  for (; epoch < config.train.epochs && !stop; ++epoch, batch_in_epoch = 0) {
    const auto order = epoch_order(data.train.size(), config.train.shuffle, config.seed, epoch);
    for (; batch_in_epoch < batches; ++batch_in_epoch) {
      const int64_t begin = batch_in_epoch * B, n = std::min(B, data.train.size() - begin);
      data.train.fill_batch(std::span<const int64_t>(order.data() + begin, n), x.data(), y.data());
      StepResult r = step.run(Tensor(x.data(), {n, data.train.lookback(), data.n_features()}),
                              Tensor(y.data(), {n, data.train.y_size()}), mix_seed(config.seed, micro_steps));
      ++micro_steps;
      log_samples += n;
      if (r.updated && step.updates() % config.train.log_every == 0) {
        const double secs = seconds_since(log_start);
        const double loss = step.take_loss();
        metrics.write({{"split", "train"}, {"step", step.updates()}, {"epoch", epoch}, {"loss", loss}, {"lr", r.lr},
                       {"grad_norm", r.grad_norm}, {"samples_per_s", log_samples / std::max(secs, 1e-9)},
                       {"time_s", time_s()}});
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
      if (config.train.max_steps > 0 && step.updates() >= config.train.max_steps) {
        summary.stopped_by = "max_steps";
        stop = true;
      }
      if (g_signal.load()) {
        summary.stopped_by = "signal";
        stop = true;
      }
      if (stop) { ++batch_in_epoch; break; }
    }
    if (summary.stopped_by == "signal") {
      writer.submit((ckpt_dir / "last").string(), model->params(), optimizer->state(), state_json(false));
      break;
    }
    // Validation, inside every epoch.
    const bool epoch_done = batch_in_epoch >= batches;
    if (!data.val.empty()) {
      const double val = evaluate(*model, data.val, config.train.loss, config.train.huber_delta, B);
      if (tty) std::fputc('\n', stderr);
      metrics.write({{"split", "val"}, {"step", step.updates()}, {"epoch", epoch}, {"loss", val},
                     {"lr", schedule->lr(step.updates())}, {"samples_per_s", nullptr}, {"time_s", time_s()},
                     {"baseline_last_value", summary.baseline_val}});
      if (!opt.quiet)
        std::fprintf(stderr, "epoch %ld val loss %.5f (best %.5f, last-value baseline %.5f)\n", (long)epoch, val,
                     std::isfinite(best_val) ? std::min(best_val, val) : val, summary.baseline_val);
      schedule->observe(val);
      if (val < best_val - config.train.early_stopping.min_delta) {
        best_val = val;
        bad_validations = 0;
        writer.submit((ckpt_dir / "best").string(), model->params(), optimizer->state(), state_json(true));
      } else if (++bad_validations >= config.train.early_stopping.patience && config.train.early_stopping.patience > 0) {
        summary.stopped_by = "early_stopping";
        stop = true;
      }
    }
    // `last` records where to continue: the next epoch when this one is complete.
    const int64_t saved_epoch = epoch, saved_batch = batch_in_epoch;
    if (epoch_done) { ++epoch; batch_in_epoch = 0; }
    writer.submit((ckpt_dir / "last").string(), model->params(), optimizer->state(), state_json(false));
    epoch = saved_epoch;
    batch_in_epoch = saved_batch;
  }
  writer.wait();
  summary.epochs = epoch;
  summary.steps = step.updates();
  if (data.val.empty()) {
    writer.submit((ckpt_dir / "best").string(), model->params(), optimizer->state(), state_json(true));
    writer.wait();
  }
  summary.best_val = best_val;
  if (summary.stopped_by != "signal") {
    // Final test evaluation with the best validated weights.
    load_checkpoint((ckpt_dir / "best").string(), model->params());
    summary.test_loss = evaluate(*model, data.test, config.train.loss, config.train.huber_delta, B);
    if (!data.test.empty())
      metrics.write({{"split", "test"}, {"step", summary.steps}, {"epoch", summary.epochs}, {"loss", summary.test_loss},
                     {"lr", nullptr}, {"samples_per_s", nullptr}, {"time_s", time_s()}});
  }
  if (!opt.quiet)
    std::fprintf(stderr, "seqtrain: stopped by %s after %ld steps; best val loss %.5f, test loss %.5f, %.1fs\n",
                 summary.stopped_by.c_str(), (long)summary.steps, best_val, summary.test_loss, time_s());
  return summary;
}

}  // namespace seqtrain
