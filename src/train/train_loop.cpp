// The training loop: see train_loop.h.
#include "train/train_loop.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <thread>

#include "backend/autotune.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/isa.h"
#include "backend/registry.h"
#include "core/text.h"
#include "core/trace.h"
#include "io/atomic_dir.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "models/summary.h"
#include "train/batch_finder.h"
#include "train/metrics.h"
#include "train/run_parts.h"
#include "train/summary_json.h"
#include "train/zero_state.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Keeps a StopToken armed while the loop runs, so the signal watcher knows someone listens.
struct ArmStop {
  explicit ArmStop(StopToken& t) : token(t) { token.arm(true); }
  ~ArmStop() { token.arm(false); }
  StopToken& token;
};

// The first `n` samples of a source: a validation pass capped by train.eval_iters batches.
class FirstSamples final : public BatchSource {
 public:
  FirstSamples(const BatchSource& source, int64_t n) : source_(source), n_(std::min(n, source.size())) {}
  int64_t size() const override { return n_; }
  int64_t x_size() const override { return source_.x_size(); }
  int64_t y_size() const override { return source_.y_size(); }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override {
    source_.fill(idx, epoch, x, y);
  }

 private:
  const BatchSource& source_;
  int64_t n_;
};

// runtime.threads for this rank: as configured, or OMP_NUM_THREADS, else (0) the machine's cores
// divided among the ranks that share it, so ranks on one machine do not oversubscribe its cores.
int rank_threads(int64_t configured, const Communicator& comm) {
  if (configured > 0 || std::getenv("OMP_NUM_THREADS") || comm.local_ranks() <= 1) return static_cast<int>(configured);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / comm.local_ranks());
}

// checkpoint_every 0 is the one step checkpoint per epoch of earlier versions.
Frequency checkpoint_frequency(const std::string& text) {
  Frequency f = parse_frequency(text, "train.checkpoint_every");
  return f.never() ? Frequency{1, Frequency::Unit::epochs} : f;
}
}  // namespace

TrainSummary TrainLoop::run() {
  resume_or_start();
  announce();
  trace::set_thread_name("train");
  if (config_.runtime.profile > 0) {
    profile_from_ = state_.micro_steps + kProfileSkip;
    profile_to_ = profile_from_ + config_.runtime.profile;
  }
  ArmStop armed(*stop_);
  summary_.stopped_by = "epochs";
  while (state_.epoch < config_.train.epochs) {
    if (!train_epoch()) {  // a stop request: `last` must hold where the run stands
      if (!last_is_current_) checkpoint("last", state_.epoch, state_.batch_in_epoch, false);
      break;
    }
    if (!end_epoch()) break;                      // a stop request during validation
    if (summary_.stopped_by != "epochs") break;  // max_steps, early stopping
  }
  return finish();
}

TrainLoop::TrainLoop(const Config& config, const TrainOptions& options)
    : config_(config), opt_(options), run_(options.out_dir), ckpt_dir_(run_ / "checkpoints"),
      comm_(options.comm ? options.comm : &local_comm_), stop_(options.stop ? options.stop : &own_stop_),
      console_(options.quiet) {
  if (!opt_.resume && fs::exists(run_ / "config.yaml") && !opt_.overwrite)
    fail("output directory '{}' already holds a run; pass --resume to continue it or --overwrite to replace it",
         run_.string());
  if (primary()) {
    observers_.add(&console_);
    for (TrainObserver* o : opt_.observers) observers_.add(o);
  }
  eval_every_ = parse_frequency(config_.train.eval_every, "train.eval_every");
  checkpoint_every_ = checkpoint_frequency(config_.train.checkpoint_every);
  // Everything that can fail on bad input happens before the run directory is touched.
  // BatchNorm's statistics would be each rank's shard's, and the run one process's no longer.
  ST_CHECK(comm_->world() == 1 || config_.model.norm != "batch",
           "config key 'model.norm' is batch, which computes its statistics over each batch, and this run has {} "
           "ranks: each rank would normalise by its own shard, unlike one process. Use model.norm: layer with several "
           "ranks, or train model.norm batch on one process", comm_->world());
  threads_ = set_cpu_threads(rank_threads(config_.runtime.threads, *comm_));
  if (const int64_t cores = system_cores(); threads_ > cores)
    observers_.on_warning(fmt::format(
        "warning: runtime.threads: {} compute threads on {} core(s): threads beyond the cores wait for one another "
        "at every parallel step, which can make a step many times slower; set runtime.threads to at most {} (0: all "
        "cores)",
        threads_, cores, cores));
  plan_ = plan_data(config_);
  workers_ = loader_workers(config_, threads_, &workers_reason_);
  feed_ = training_feed(plan_, config_, workers_);
  observers_.on_note("data: " + plan_.source);
  if (!feed_.cache.path.empty()) observers_.on_note(feed_.cache.message);
  plan_model();
  resolve_batch_size();
  ST_CHECK(comm_->world() <= config_.train.batch_size,
           "train.batch_size = {} is smaller than the {} ranks of this run: every rank trains on its share of each "
           "global batch and needs at least one sample of it; raise train.batch_size to at least {} or start fewer "
           "ranks (mpirun -np)",
           config_.train.batch_size, comm_->world(), comm_->world());
  build_model();
  build_optimizer();
  if (plan_.val && config_.train.eval_iters > 0)
    val_capped_ = std::make_unique<FirstSamples>(*plan_.val, config_.train.eval_iters * config_.train.batch_size);
}

void TrainLoop::plan_model() {
  spec_ = model_spec(config_, plan_);
  if (spec_.autotune) tuner_ = std::make_shared<Autotuner>();
  // runtime.precision, resolved once: the model's layers and the step's loss scaling follow it.
  precision_ = resolve_precision(config_.runtime.precision, spec_.backend, &precision_why_);
}

// A resumed run keeps the batch it was started with (its config.yaml holds the number the
// search chose): searching again could pick another and change the epoch's batches under it.
void TrainLoop::resolve_batch_size() {
  if (config_.train.batch_size != kAutoBatch) return;
  const fs::path saved = run_ / "config.yaml";
  if (opt_.resume && fs::exists(saved)) {
    const int64_t b = load_config(saved.string()).train.batch_size;
    if (b != kAutoBatch) {
      config_.train.batch_size = b;
      observers_.on_note(fmt::format("train.batch_size auto: {} as the run chose at its start ({}); a resume "
                                     "never searches again", b, saved.string()));
      return;
    }
  }
  ST_CHECK(comm_->world() == 1, "train.batch_size: auto searches on one process, and this run has {} ranks: give "
           "train.batch_size a number (a single-process run with auto logs the one it finds)", comm_->world());
  const BatchChoice choice = choose_auto_batch(config_, plan_, *feed_.source, spec_, precision_, workers_);
  for (const std::string& line : choice.lines()) observers_.on_note(line);
  config_.train.batch_size = choice.batch;
}

void TrainLoop::build_model() {
  std::vector<std::string> notes;
  model_ = build_run_model(config_, spec_, ModelEnv{tuner_, precision_}, /*load_weights=*/true, &notes);
  for (const std::string& line : notes) observers_.on_note(line);
}

void TrainLoop::build_optimizer() {
  const auto& t = config_.train;
  optimizer_ = build_run_optimizer(t, *model_);
  if (t.ema_decay > 0) {
    ema_ = std::make_unique<Ema>(t.ema_decay, model_->params().backend());
    ema_->set_copied(model_->params().buffer_ranges());  // followed, not averaged (optim/ema.h)
  }
  // train.param_groups and the fine-tuning schedule; applied at each epoch's start (train_epoch).
  groups_ = std::make_unique<GroupSchedule>(t, model_->params());
  batches_ = batch_count(feed_.source->size(), t.batch_size);
  const int64_t updates_per_epoch = std::max<int64_t>(1, batches_ / t.grad_accum);
  total_updates_ = updates_per_epoch * t.epochs;
  if (t.max_steps > 0) total_updates_ = std::min(total_updates_, t.max_steps);
  // The schedule itself knows only step counts; here the run's length is known in the config's
  // terms, so a warmup longer than the run is said with the keys that set both.
  ST_CHECK(t.schedule.name != "cosine" || t.schedule.warmup_steps <= total_updates_,
           "train.schedule.warmup_steps = {} is longer than this run: {} optimizer steps ({} x {} "
           "an epoch{}); lower train.schedule.warmup_steps or raise train.epochs",
           t.schedule.warmup_steps, total_updates_, count_of(t.epochs, "epoch"), updates_per_epoch,
           t.max_steps > 0 ? fmt::format(", capped by train.max_steps = {}", t.max_steps) : std::string());
  schedule_ = make_schedule(ScheduleOptions{.name = t.schedule.name, .base_lr = t.optimizer.lr,
                                            .step_size = t.schedule.step_size, .gamma = t.schedule.gamma,
                                            .warmup_steps = t.schedule.warmup_steps, .total_steps = total_updates_,
                                            .min_lr = t.schedule.min_lr, .factor = t.schedule.factor,
                                            .patience = t.schedule.patience});
  // The policy says whether the gradients need dynamic loss scaling (fp16; optim/loss_scaler.h).
  scaler_ = build_loss_scaler(config_, precision_);
  objective_ = make_objective(config_, plan_);
  StepOptions step_options = run_step_options(t, scaler_.get(), comm_, objective_.get());
  step_options.graphs = config_.runtime.cuda_graphs == "auto";
  step_options.note = [this](const std::string& line) { observers_.on_note(line); };
  step_ = std::make_unique<TrainStep>(*model_, *optimizer_, *schedule_, std::move(step_options));
  if (t.zero != 0 && comm_->world() == 1)
    observers_.on_note("train.zero: 1 on one process: nothing to shard, the optimizer keeps every moment");
  else if (t.zero != 0)
    observers_.on_note(fmt::format("train.zero: 1: each of {} ranks keeps 1/{} of AdamW's moments", comm_->world(),
                                   comm_->world()));
}

// The primary rank locks the run directory, clears it for --overwrite and tidies what a crash
// left; then the autotune cache (per run directory and machine) is read.
void TrainLoop::open_run_dir() {
  if (!primary()) return;
  std::error_code ec;
  fs::create_directories(run_, ec);
  ST_CHECK(!ec, "cannot create the run directory '{}': {}; give train --out a directory you can write to",
           run_.string(), ec.message());
  lock_ = std::make_unique<RunLock>(run_);
  // The trace is written mid-run: a place it cannot go is an error now, not after the window.
  ST_CHECK(config_.runtime.profile == 0 || !fs::is_directory(run_ / "trace.json", ec),
           "runtime.profile: the trace goes to {}, which is a directory; remove it, or train without --profile "
           "(runtime.profile: 0)",
           (run_ / "trace.json").string());
  for (const auto& note : prepare_run_dir(run_, opt_.overwrite && !opt_.resume)) observers_.on_note(note);
  if (tuner_) {
    autotune_saved_ = false;
    const int64_t n = load_autotune_cache(run_, *tuner_);
    if (n > 0 || fs::exists(run_ / "autotune.json"))
      observers_.on_note(fmt::format("autotune: {} cached decision(s) from {}", n, (run_ / "autotune.json").string()));
  }
}

void TrainLoop::resume_or_start() {
  open_run_dir();
  // Only the primary looks into the run directory; the others learn what it found.
  const auto candidates =
      opt_.resume && primary() ? resume_candidates(ckpt_dir_) : std::vector<ResumeCandidate>{};
  uint8_t found = !candidates.empty();
  comm_->broadcast_bytes(&found, 1);
  resuming_ = found != 0;
  if (opt_.resume && !resuming_)
    observers_.on_warning(fmt::format("'{}' has no checkpoint yet; starting the run from the beginning", run_.string()));
  if (resuming_) resume_from(candidates);
  if (primary()) open_logs();
  make_loader();
  replay_buffers_.reserve(*feed_.source, config_.train.batch_size);
  if (resuming_) {
    replay_partial_accumulation();
    // The losses before the checkpoint, summed over the ranks that wrote it: the primary carries
    // them, so the next record's sum over ranks counts them once whatever the rank count now.
    if (primary()) step_->restore_loss(state_.pending_loss_sum, state_.pending_loss_count);
  }
  if (plan_.windows) {
    summary_.baseline_val = last_value_baseline(*plan_.windows, plan_.windows->val);
    scoring_ = ForecastScoring::of(*plan_.windows, config_.data.seasons, forecast_quantiles(config_.train));
  } else if (plan_.classes == 0 && plan_.vocab == 0 && !plan_.y_shape.empty()) {
    const Normalizer x_stats = Normalizer::from_json(plan_.normalizer);
    scoring_ = ForecastScoring::of_npy(plan_.steps, plan_.features, plan_.y_shape[0],
                                       plan_.y_shape.size() > 1 ? plan_.y_shape[1] : 1, forecast_quantiles(config_.train),
                                       plan_.target_inputs, &x_stats, plan_.train.get());
  }
  start_ = log_start_ = Clock::now();
}

void TrainLoop::make_loader() {
  loader_ = std::make_unique<Loader>(*feed_.source,
                                     LoaderOptions{.workers = workers_, .prefetch = config_.data.prefetch,
                                                   .batch_size = config_.train.batch_size,
                                                   .shuffle = config_.train.shuffle, .seed = config_.seed,
                                                   .allocator = model_->params().backend().pinned_allocator(),
                                                   .rank = comm_->rank(), .world = comm_->world(),
                                                   .layout = sample_layout(plan_, MaskDraw::per_epoch)});
}

StepTiming TrainLoop::time_steps(int64_t warmup, int64_t steps, int64_t eval_batches) {
  StepTiming t;
  t.threads = threads_;
  t.workers = workers_;
  t.workers_reason = workers_reason_;
  t.batches_per_epoch = batches_;
  t.updates_per_epoch = std::max<int64_t>(1, batches_ / config_.train.grad_accum);
  t.total_updates = total_updates_;
  t.train_samples = feed_.source->size();
  t.parameters = static_cast<int64_t>(model_->params().size());
  t.backend = std::string(model_->params().backend().name());
  const int64_t B = config_.train.batch_size;
  const BatchSource* val = val_capped_ ? val_capped_.get() : plan_.val.get();
  t.val_batches = val ? batch_count(val->size(), B) : 0;
  t.test_batches = plan_.test ? batch_count(plan_.test->size(), B) : 0;
  make_loader();
  // Batches in epoch order, on into the next epochs when the probe outlasts one (a small split).
  int64_t epoch = 0, batch = 0, micro = 0;
  groups_->apply(epoch, model_->params(), *optimizer_);
  loader_->start_epoch(epoch, 0);
  auto train_one = [&] {  // returns the batch's sample count
    if (batch == batches_) {
      groups_->apply(++epoch, model_->params(), *optimizer_);
      loader_->start_epoch(epoch, 0);
      batch = 0;
    }
    const Batch* b = loader_->next();
    ST_CHECK(b != nullptr, "the data loader ended epoch {} early at batch {}", epoch, batch);
    run_batch(*b, micro++);
    const int64_t n = b->count;
    loader_->release(b);
    ++batch;
    return n;
  };
  auto t0 = Clock::now();
  for (int64_t i = 0; i < warmup; ++i) train_one();
  // Reading the loss is the host read a log record makes: it waits for a device's queued work,
  // so each time is the steps' and not just their launches'.
  step_->take_loss();
  t.warmup_batches = warmup;
  t.warmup_s = seconds_since(t0);
  loader_->reset_wait();
  t0 = Clock::now();
  for (int64_t i = 0; i < steps; ++i) t.timed_samples += train_one();
  step_->take_loss();
  t.timed_batches = steps;
  t.timed_s = seconds_since(t0);
  t.data_wait_s = loader_->wait_seconds();
  t.activation_bytes = step_->activation_bytes();
  if (val && eval_batches > 0 && t.val_batches > 0) {
    const FirstSamples capped(*val, std::min(eval_batches, t.val_batches) * B);
    double accuracy = 0;
    nlohmann::json forecast;
    t0 = Clock::now();
    evaluate_split(capped, plan_.windows ? &plan_.windows->val : nullptr, &accuracy, &forecast);
    t.eval_batch_s = seconds_since(t0) / static_cast<double>(batch_count(capped.size(), B));
  }
  return t;
}

void TrainLoop::resume_from(const std::vector<ResumeCandidate>& candidates) {
  OptimizerState os;
  std::vector<float> raw;  // train.ema_decay: the trained weights (the params then hold the average)
  nlohmann::json st;
  std::string chosen;
  for (const auto& c : candidates) {  // the primary's (the others have none)
    check_resume_config(c.state, config_, run_, c.dir, opt_.quiet);
    check_resume_spec(c.state, spec_, run_, c.dir);  // what the data decides (resume.h)
    try {
      st = load_checkpoint(c.dir, model_->params(), &os, &raw);
      ST_CHECK(!ema_ || !raw.empty(),
               "checkpoint '{}' holds no trained weights beside their average (it was written without "
               "train.ema_decay); resume with the config it was written with, or start the run again with --overwrite",
               c.dir);
      chosen = c.dir;
      break;
    } catch (const Error& e) {
      observers_.on_warning(fmt::format("warning: skipping checkpoint '{}': {}", c.dir, e.what()));
    }
  }
  // A primary that found nothing loadable fails here, and MPI_Abort ends the ranks waiting below.
  ST_CHECK(!primary() || !chosen.empty(), "no checkpoint in '{}' can be loaded (see the warnings above); start the "
           "run again with --overwrite", ckpt_dir_.string());
  if (comm_->world() > 1) share_resume_state(st, chosen, os);
  state_ = RunState::from_json(st);
  // train.ema_decay: the parameters hold the checkpoint's average; it goes into the Ema and the
  // trained weights into the parameters (the primary's, on every rank).
  if (ema_) {
    ParamStore& ps = model_->params();
    {
      const HostReadView average = ps.read_view();
      ema_->load({average.data(), average.size()}, state_.updates);
    }
    raw.resize(ps.size());
    comm_->broadcast(raw.data(), raw.size());
    ps.write_params(raw);
  }
  refuse_finished_run(chosen);  // before anything of the run is rewritten
  ST_CHECK(!st.contains("normalizer") || state_.normalizer == plan_.normalizer,
           "{}: the training data changed since checkpoint '{}' was written (its normalization statistics "
           "differ); restore the data (data.path / data.synthetic.*) or start a new run",
           (run_ / "config.yaml").string(), chosen);
  ST_CHECK(!st.contains("vocab") || state_.vocab == plan_.vocab_json,
           "{}: the text's vocabulary changed since checkpoint '{}' was written; restore data.path or start a "
           "new run", (run_ / "config.yaml").string(), chosen);
  optimizer_->load_state(os);
  schedule_->load_state(schedule_state_from_json(state_.schedule));
  step_->set_updates(state_.updates);
  if (scaler_ && !state_.loss_scaler.is_null()) scaler_->load_json(state_.loss_scaler);
  if (state_.tag.rfind("step-", 0) == 0) resumed_from_ = state_.tag;
  if (config_.runtime.deterministic && state_.threads > 0 && state_.threads != threads_)
    observers_.on_warning(fmt::format("warning: the run used {} threads and now uses {}; runtime.deterministic "
                                      "promises bit-identical results only for the same thread count",
                                      state_.threads, threads_));
  observers_.on_note(fmt::format("resuming '{}' from {} at epoch {}, batch {} (step {})", run_.string(),
                                    fs::path(chosen).filename().string(), state_.epoch, state_.batch_in_epoch,
                                    step_->updates()));
}

void TrainLoop::share_resume_state(nlohmann::json& st, std::string& dir, OptimizerState& os) {
  nlohmann::json head;
  if (primary()) {
    head["state"] = st;
    head["dir"] = dir;
    head["step"] = os.step;
    head["param_steps"] = nlohmann::json::array();
    for (const StepCount& c : os.param_steps) head["param_steps"].push_back({c.begin, c.end, c.steps});
    head["buffers"] = nlohmann::json::array();
    for (const auto& [name, values] : os.buffers) head["buffers"].push_back({name, values.size()});
  }
  head = nlohmann::json::parse(broadcast_string(*comm_, primary() ? head.dump() : std::string()));
  ParamStore& ps = model_->params();
  comm_->broadcast(ps.params(), ps.size());
  if (primary()) {
    for (auto& [name, values] : os.buffers) comm_->broadcast(values.data(), values.size());
    return;
  }
  st = head.at("state");
  dir = head.at("dir").get<std::string>();
  os = OptimizerState{};
  os.step = head.at("step").get<int64_t>();
  for (const auto& c : head.at("param_steps"))
    os.param_steps.push_back({c.at(0).get<size_t>(), c.at(1).get<size_t>(), c.at(2).get<int64_t>()});
  // Whole buffers even under train.zero: load_state keeps this rank's slice of them.
  for (const auto& b : head.at("buffers")) {
    std::vector<float>& values = os.buffers[b.at(0).get<std::string>()];
    values.resize(b.at(1).get<size_t>());
    comm_->broadcast(values.data(), values.size());
  }
}

// config.yaml, metrics.jsonl and the TensorBoard events file. The events file comes first: a
// run directory that became unwritable (the lock file and checkpoints/ already there) fails
// on it before anything of the run is rewritten or cut back.
void TrainLoop::open_logs() {
  if (config_.runtime.tensorboard) {
    const std::optional<int64_t> start = resuming_ ? std::optional<int64_t>(step_->updates() + 1) : std::nullopt;
    tensorboard_ = std::make_unique<TensorBoardObserver>(run_, start);
    observers_.on_note("TensorBoard: " + tensorboard_->path().string());
  }
  write_config_yaml(run_, to_yaml(config_));  // the config the run continues with
  if (resuming_) {
    // Records written after the checkpoint are written again by the resumed run.
    if (state_.metrics_bytes >= 0) truncate_metrics((run_ / "metrics.jsonl").string(), state_.metrics_bytes);
    cut_events_files(run_, state_.tensorboard, tensorboard_ ? tensorboard_->path() : fs::path());
  } else {
    fs::remove(run_ / "metrics.jsonl");
    remove_earlier_events_files(run_, tensorboard_ ? tensorboard_->path() : fs::path());
  }
  metrics_ = std::make_unique<MetricsObserver>((run_ / "metrics.jsonl").string());
  observers_.add(metrics_.get());
  observers_.add(tensorboard_.get());
}

// A run whose newest checkpoint ended it (all its epochs, train.max_steps, early stopping) has
// nothing left to train: resuming it would only evaluate again and rewrite its test record and
// summary. Refused with the key that extends it.
void TrainLoop::refuse_finished_run(const std::string& checkpoint) const {
  const auto& t = config_.train;
  const std::string resume = "seqtrain train --resume " + run_.string();
  ST_CHECK(state_.epoch < t.epochs,
           "run '{}' is finished: {} holds the end of all {} (train.epochs); its test record and summary.json are "
           "written. To train on, raise the epochs: {} --set train.epochs={}",
           run_.string(), checkpoint, count_of(t.epochs, "epoch"), resume, t.epochs * 2);
  ST_CHECK(t.max_steps <= 0 || state_.updates < t.max_steps,
           "run '{}' is finished: it reached train.max_steps = {} ({}). To train on, raise it: {} --set "
           "train.max_steps={}",
           run_.string(), t.max_steps, checkpoint, resume, t.max_steps * 2);
  const auto& es = t.early_stopping;
  ST_CHECK(es.patience <= 0 || state_.bad_validations < es.patience,
           "run '{}' is finished: early stopping ended it after {} without improvement "
           "(train.early_stopping.patience = {}). To train on anyway, raise the patience: {} --set "
           "train.early_stopping.patience={}",
           run_.string(), count_of(state_.bad_validations, "validation"), es.patience, resume,
           state_.bad_validations + es.patience);
}

// A checkpoint can fall inside a gradient accumulation (at an epoch's end or on a stop). The
// weights have not changed since that optimizer step began, so re-running its first
// micro-batches rebuilds the accumulated gradient exactly. Their losses are already in the
// saved pending loss, so the step's copy of them is dropped. Buffers (BatchNorm's running
// statistics) already hold those micro-batches' updates: they are put back as the checkpoint had
// them after the replay, on the device.
void TrainLoop::replay_partial_accumulation() {
  const int64_t accum = config_.train.grad_accum, m = state_.micro_steps % accum;
  if (m == 0) return;
  ParamStore& ps = model_->params();
  const auto buffers = ps.buffer_ranges();
  size_t held = 0;
  for (const auto& range : buffers) held += range.second;
  DeviceBuffer saved;
  if (held > 0) {
    saved = DeviceBuffer(ps.backend(), held, false);
    size_t at = 0;
    for (const auto& [offset, n] : buffers) ps.backend().copy(ps.params() + offset, saved.data() + at, n), at += n;
  }
  const int64_t B = config_.train.batch_size;
  std::vector<std::pair<int64_t, int64_t>> where;  // (epoch, batch) of each, newest first
  for (int64_t e = state_.epoch, b = state_.batch_in_epoch; static_cast<int64_t>(where.size()) < m;) {
    if (b == 0) { --e; b = batches_; }
    where.emplace_back(e, --b);
  }
  std::reverse(where.begin(), where.end());
  for (int64_t i = 0; i < m; ++i) {
    const auto [e, b] = where[i];
    const auto order = epoch_order(feed_.source->size(), config_.train.shuffle, config_.seed, e);
    const int64_t begin = b * B;
    const auto [lo, hi] = shard_rows(std::min(B, feed_.source->size() - begin), comm_->rank(), comm_->world());
    Batch batch;
    batch.index = b;
    if (comm_->world() > 1) batch.rows = BatchRows{lo, std::min(B, feed_.source->size() - begin)};
    groups_->apply(e, model_->params(), *optimizer_);  // the replayed batch's epoch's frozen tensors
    fill_batch(*feed_.source, sample_layout(plan_, MaskDraw::per_epoch),
               std::span<const int64_t>(order.data() + begin + lo, hi - lo), e,
               replay_buffers_, batch);
    ST_CHECK(!run_batch(batch, state_.micro_steps - m + i).updated,
             "internal error: replaying a partial gradient accumulation completed an optimizer step");
  }
  size_t at = 0;
  for (const auto& [offset, n] : buffers) ps.backend().copy(saved.data() + at, ps.params() + offset, n), at += n;
  step_->take_loss();
}

void TrainLoop::announce() {
  observers_.on_note(fmt::format("loader: {} worker(s) ({}); {} compute thread(s){}", workers_, workers_reason_,
                                 threads_, feed_.augment ? "; augmentation on" : ""));
  size_t parameters = model_->params().size();  // less the buffers (BatchNorm's running statistics)
  for (const auto& range : model_->params().buffer_ranges()) parameters -= range.second;
  observers_.on_note(fmt::format("{} model, {} parameters, {} train / {} val / {} test {}, {} threads", spec_.type,
                                 parameters, plan_.train->size(), DataPlan::size_of(plan_.val),
                                 DataPlan::size_of(plan_.test), plan_.unit, threads_));
  for (const std::string& line : format_summary(spec_, model_->params())) observers_.on_note(line);
  if (ema_)
    observers_.on_note(fmt::format("train.ema_decay {}: validation, checkpoints and the test use the weights' moving "
                                   "average (over about {:.0f} of this run's {} steps)",
                                   ema_->decay(), 1.0 / (1.0 - ema_->decay()), total_updates_));
  observers_.on_note("CPU kernels: " + isa_summary());
  const std::string_view device = model_->params().backend().name();
  if (const int gpu = gpu_ordinal(model_->params().backend()); gpu >= 0) {
    gpu_ = std::make_unique<GpuMonitor>(gpu);
    observers_.on_note(gpu_->available() ? fmt::format("{}: GPU utilisation, memory and power logged (NVML)", device)
                                         : gpu_->why_unavailable());
  }
  const std::string& covers = family(spec_.type).precision_covers;
  if (!covers.empty()) observers_.on_note(precision_why_ + " (" + covers + ")");
  else if (config_.runtime.precision != "fp32")
    observers_.on_note(fmt::format("the {} model runs in fp32 (runtime.precision applies to {})", spec_.type,
                                   family_names_where([](const ModelFamily& f) { return !f.precision_covers.empty(); })));
}

// The average follows every optimizer step, fp16-skipped ones included (as a torch loop that
// calls update_parameters after scaler.step), so its update count is the step count.
StepResult TrainLoop::run_batch(const Batch& batch, int64_t micro) {
  const StepResult r = step_->run(batch, mix_seed(config_.seed, static_cast<uint64_t>(micro)));
  if (r.updated && ema_) {
    ST_TRACE("train.ema", "train");
    ema_->update(model_->params().params(), model_->params().size());
  }
  return r;
}

// Trains the rest of the current epoch; returns false when a stop request ended it.
bool TrainLoop::train_epoch() {
  epoch_start_ = Clock::now();
  groups_->apply(state_.epoch, model_->params(), *optimizer_);
  loader_->start_epoch(state_.epoch, state_.batch_in_epoch);
  loader_->reset_wait();
  while (state_.batch_in_epoch < batches_) {
    if (state_.micro_steps == profile_from_) profile_.start();
    {
      ST_TRACE("train.micro_batch", "train");
      const Batch* batch = [&] {
        ST_TRACE("data.wait", "data");
        return loader_->next();
      }();
      ST_CHECK(batch != nullptr, "the data loader ended epoch {} early at batch {}", state_.epoch, state_.batch_in_epoch);
      const StepResult r = [&] {
        ST_TRACE("train.step", "train");
        return run_batch(*batch, state_.micro_steps);
      }();
      if (!autotune_saved_) {
        ST_TRACE("autotune.save", "io");
        autotune_saved_ = true;
        save_autotune_log();
      }
      log_samples_ += batch->count;
      {
        ST_TRACE("data.release", "data");  // the slot back to the loader's workers
        loader_->release(batch);
      }
      ++state_.micro_steps;
      ++state_.batch_in_epoch;
      last_is_current_ = false;
      if (r.updated) {
        ST_TRACE("train.after_update", "train");  // logging, evaluation and checkpoints by update count
        after_update(r);
      }
    }
    if (profile_.active() && state_.micro_steps >= profile_to_) end_profile();
    check_stop();
    if (summary_.stopped_by != "epochs") break;
  }
  return !stop_requested();
}

// Logging, evaluation and periodic checkpoints counted in updates; the max_steps cap.
void TrainLoop::after_update(const StepResult& r) {
  const int64_t updates = step_->updates();
  if (eta_from_updates_ < 0) {
    eta_from_updates_ = updates;
    eta_from_s_ = time_s();
  }
  if (updates % config_.train.log_every == 0) {
    StepEvent e;
    e.epoch = state_.epoch;
    e.updates = updates;
    double samples = static_cast<double>(log_samples_);
    e.loss = take_logged_loss(&samples);  // over every rank, with the samples of every rank's shard
    e.lr = r.lr;
    e.grad_norm = step_->grad_norm();  // read here, once per log interval (train/step.h)
    e.samples_per_s = samples / std::max(seconds_since(log_start_), 1e-9);
    if (plan_.vocab > 0) e.tokens_per_s = e.samples_per_s * static_cast<double>(plan_.steps);
    e.time_s = time_s();
    if (updates > eta_from_updates_)
      e.eta_s = (time_s() - eta_from_s_) / double(updates - eta_from_updates_) *
                double(std::max<int64_t>(0, total_updates_ - updates));
    if (scaler_) {
      e.loss_scale = scaler_->scale();
      e.skipped_since_last = scaler_->take_skipped_since_report();
    }
    if (gpu_) e.gpu = gpu_->sample();
    e.total_updates = total_updates_;
    e.epoch_done = batches_ > 0 ? double(state_.batch_in_epoch) / double(batches_) : 0.0;
    ST_TRACE("train.log", "train");
    observers_.on_step(e);
    log_start_ = Clock::now();
    log_samples_ = 0;
    check_finite_loss(e.loss, updates);  // after the record, so metrics.jsonl shows it
  }
  if (eval_every_.due_after_update(updates)) validate();
  if (checkpoint_every_.due_after_update(updates)) {
    checkpoint(step_tag(updates), state_.epoch, state_.batch_in_epoch, true);
    last_is_current_ = true;
  }
  if (config_.train.max_steps > 0 && updates >= config_.train.max_steps && summary_.stopped_by == "epochs")
    summary_.stopped_by = "max_steps";
}

// With several ranks the request is agreed at this step boundary: a signal may reach one rank
// only (kill -TERM of one process), and a rank that stopped alone would leave the others waiting
// in their next collective. One small all-reduce per micro-batch: [ranks signalled, the sum of
// their signal numbers, ranks whose library token asked].
void TrainLoop::check_stop() {
  bool asked = stop_->requested();
  int sig = stop_->signal();
  if (comm_->world() > 1) {
    double v[3] = {asked && sig ? 1.0 : 0.0, asked && sig ? double(sig) : 0.0, asked && !sig ? 1.0 : 0.0};
    comm_->all_reduce_sum(v, 3);
    asked = v[0] > 0 || v[2] > 0;
    // The signal the signalled ranks got (SIGTERM when they got different ones).
    const double mean = v[0] > 0 ? v[1] / v[0] : 0.0;
    sig = v[0] > 0 ? (mean == std::floor(mean) ? static_cast<int>(mean) : SIGTERM) : 0;
  }
  if (asked && !stop_requested()) {
    summary_.stopped_by = sig ? "signal" : "stop_token";
    stop_signal_ = sig;
  }
}

bool TrainLoop::stop_requested() const {
  return summary_.stopped_by == "signal" || summary_.stopped_by == "stop_token";
}

// The epoch's data record, evaluations and checkpoints counted in epochs; then on to the next
// epoch. Returns false when a stop request arrived meanwhile (`last` is then current).
bool TrainLoop::end_epoch() {
  const double train_s = seconds_since(epoch_start_), wait_s = loader_->wait_seconds();
  observers_.on_epoch(EpochEvent{.epoch = state_.epoch, .updates = step_->updates(), .train_s = train_s,
                                 .data_wait_s = wait_s, .time_s = time_s(),
                                 .data_wait_share = wait_s / std::max(train_s, 1e-9)});
  if (eval_every_.due_after_epoch(state_.epoch)) validate();
  // The epoch's checkpoint continues at the next epoch when this one is complete.
  const bool done = state_.batch_in_epoch >= batches_;
  const int64_t next_epoch = done ? state_.epoch + 1 : state_.epoch, next_batch = done ? 0 : state_.batch_in_epoch;
  const bool periodic = checkpoint_every_.due_after_epoch(state_.epoch);
  checkpoint(periodic ? step_tag(step_->updates()) : "last", next_epoch, next_batch, periodic);
  if (summary_.stopped_by == "epochs") check_stop();
  if (stop_requested()) {
    state_.epoch = next_epoch;
    state_.batch_in_epoch = next_batch;
    return false;
  }
  ++state_.epoch;
  state_.batch_in_epoch = 0;
  return true;
}

EvalEvent TrainLoop::eval_event(const std::string& split, double loss) const {
  EvalEvent e;
  e.split = split;
  e.epoch = state_.epoch;
  e.updates = step_->updates();
  e.loss = loss;
  e.time_s = time_s();
  return e;
}

// The objective's mean loss over `split` and, for a forecasting run, its scored forecasts.
// With several ranks every rank gets the same figures, so every rank takes the same decisions
// (best checkpoint, early stopping, the plateau schedule): without a forecast scorer each rank
// runs its shard of every batch and the sums are added over ranks; a forecasting run's scorer
// needs every window in one place, so there each rank runs the whole split and rank 0's figures
// are everyone's.
double TrainLoop::evaluate_split(const BatchSource& split, const WindowDataset* windows, double* accuracy,
                                 nlohmann::json* forecast) {
  std::optional<ForecastScorer> scorer;
  if (scoring_) scorer.emplace(*scoring_, series_of(windows));
  const SampleLayout layout = sample_layout(plan_, MaskDraw::per_sample);
  const int64_t B = config_.train.batch_size;
  if (comm_->world() > 1 && !scorer) {
    const ObjectiveSum mine = evaluate_sum(*model_, split, layout, *objective_, B, {},
                                           EvalShard{comm_->rank(), comm_->world()});
    double v[3] = {mine.loss, static_cast<double>(mine.count), static_cast<double>(mine.correct)};
    comm_->all_reduce_sum(v, 3);
    const ObjectiveSum all{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
    if (accuracy) *accuracy = all.accuracy();
    return all.mean();
  }
  double loss = evaluate(*model_, split, layout, *objective_, B, accuracy, scorer_hook(scorer));
  if (scorer) *forecast = scorer->report();
  if (comm_->world() > 1) {
    double v[2] = {loss, accuracy ? *accuracy : 0.0};
    comm_->broadcast_bytes(v, sizeof v);
    loss = v[0];
    if (accuracy) *accuracy = v[1];
    *forecast = nlohmann::json::parse(broadcast_string(*comm_, forecast->dump()));
  }
  return loss;
}

double TrainLoop::monitored(double loss, double accuracy, const nlohmann::json& forecast) const {
  const std::string& m = config_.train.monitor;
  if (m == "val_loss") return loss;
  if (m == "val_accuracy") return -accuracy;
  return report_metric(forecast, m.substr(4));  // "val_mae" -> "mae"; NaN (never an improvement) when absent
}

void TrainLoop::validate() {
  ST_TRACE("evaluate.val", "eval");
  if (!plan_.val) return;
  double accuracy = 0;
  nlohmann::json forecast;
  const double val = [&] {
    const AveragedWeights averaged(ema_.get(), model_->params().params(), model_->params().size());
    return evaluate_split(val_capped_ ? *val_capped_ : *plan_.val, plan_.windows ? &plan_.windows->val : nullptr,
                          &accuracy, &forecast);
  }();
  const double watched = monitored(val, accuracy, forecast);
  const auto& es = config_.train.early_stopping;
  const bool improved = watched < state_.best_val - es.min_delta;  // false for NaN
  EvalEvent e = eval_event("val", val);
  e.lr = schedule_->lr(step_->updates());
  if (plan_.classes > 0) e.accuracy = accuracy;
  e.baseline = summary_.baseline_val;  // windowed forecasting only
  e.forecast = forecast;
  e.monitor = config_.train.monitor;
  const double best = improved || !std::isfinite(state_.best_val) ? watched : state_.best_val;
  e.best = config_.train.monitor == "val_accuracy" ? -best : best;
  observers_.on_eval(e);
  schedule_->observe(watched);
  if (improved) {
    state_.best_val = watched;
    state_.best_val_loss = val;
    state_.bad_validations = 0;
    checkpoint("best", state_.epoch, state_.batch_in_epoch, false);
  } else if (++state_.bad_validations >= es.patience && es.patience > 0 && summary_.stopped_by == "epochs") {
    summary_.stopped_by = "early_stopping";
  }
}

// Hands a snapshot to the background writer; a periodic one (step-<N>) also becomes `last`
// and prunes older step checkpoints. Only the primary rank writes.
void TrainLoop::checkpoint(const std::string& tag, int64_t next_epoch, int64_t next_batch, bool periodic) {
  hold_losses();  // every rank: the pending losses are summed over ranks
  // Weights that produced a NaN loss are not worth a checkpoint, least of all over `last`.
  if (state_.pending_loss_count > 0) check_finite_loss(state_.pending_loss_sum, step_->updates());
  // Every rank too: under train.zero each holds a slice of the moments, gathered to the primary.
  OptimizerState optimizer_state = whole_optimizer_state(*optimizer_, *comm_, model_->params().size());
  if (!primary()) return;
  ST_TRACE("checkpoint", "io");
  const auto t0 = Clock::now();
  WriteJob job;
  job.dir = (ckpt_dir_ / tag).string();
  if (periodic) {
    job.link_last = (ckpt_dir_ / "last").string();
    job.prune_in = ckpt_dir_.string();
    job.keep = config_.train.keep_last;
    job.protect = resumed_from_;
  }
  // train.ema_decay: model.safetensors gets the average, optimizer.safetensors the trained
  // weights beside it (what a resume continues from).
  std::vector<float> raw;
  if (ema_) {
    raw.resize(model_->params().size());
    model_->params().read_params(raw);
  }
  {
    const AveragedWeights averaged(ema_.get(), model_->params().params(), model_->params().size());
    writer_.submit(std::move(job), model_->params(), std::move(optimizer_state),
                   state_at(tag, next_epoch, next_batch).to_json(), std::move(raw));
  }
  summary_.checkpoint_block_s += seconds_since(t0);
  observers_.on_checkpoint(CheckpointEvent{tag, (ckpt_dir_ / tag).string(), next_epoch, step_->updates()});
}

// The caller has held the losses (hold_losses, on every rank).
RunState TrainLoop::state_at(const std::string& tag, int64_t next_epoch, int64_t next_batch) {
  RunState st = state_;
  st.tag = tag;
  st.epoch = next_epoch;
  st.batch_in_epoch = next_batch;
  st.updates = step_->updates();
  st.seed = config_.seed;
  st.threads = threads_;
  st.cpu_isa = isa_name(active_isa());
  st.time_s = time_s();
  st.metrics_bytes = metrics_ ? metrics_->bytes() : 0;
  st.tensorboard = tensorboard_ ? tensorboard_->position() : nlohmann::json();
  st.config_hash = config_hash(config_);
  st.config_yaml = to_yaml(config_);
  st.normalizer = plan_.normalizer;
  st.io = model_io_json(plan_);
  st.vocab = plan_.vocab_json;
  st.model_spec = spec_to_json(spec_);  // what load_model rebuilds the model from
  st.features = plan_.windows ? plan_.windows->features : std::vector<std::string>{};
  st.targets = plan_.windows ? plan_.windows->targets : std::vector<std::string>{};
  st.schedule = schedule_state_to_json(schedule_->state());
  st.loss_scaler = scaler_ ? scaler_->to_json() : nlohmann::json();
  return st;
}

// Moves the step's unlogged train losses into the pending ones, so a checkpoint carries them.
// The train losses since the previous record, as a checkpoint keeps them (the step's sums go on).
// Collective with several ranks: the checkpoint carries the sum over every rank.
void TrainLoop::hold_losses() {
  state_.pending_loss_sum = step_->loss_sum(&state_.pending_loss_count);
  if (comm_->world() == 1) return;
  double v[2] = {state_.pending_loss_sum, static_cast<double>(state_.pending_loss_count)};
  comm_->all_reduce_sum(v, 2);
  state_.pending_loss_sum = v[0];
  state_.pending_loss_count = static_cast<int64_t>(v[1]);
}

// A NaN or inf train loss means the weights are no longer numbers (or a batch was not): every
// later step, validation and checkpoint would carry it, so the run stops here, on every rank
// alike (the loss is summed over the ranks), before anything is written.
void TrainLoop::check_finite_loss(double loss, int64_t updates) const {
  if (std::isfinite(loss)) return;
  fail("the train loss is {} in the updates up to {} (epoch {}): training diverged, or a batch holds NaN or inf, "
       "and the weights are no longer usable. Checkpoints written before it are kept, and nothing after it is "
       "written. Lower train.optimizer.lr or set train.grad_clip, check the data for extreme values, then "
       "resume from the last good checkpoint (--resume) or start again",
       value_text(loss), updates, state_.epoch);
}

// The mean train loss since the previous train record: one sum over its batches, in their order,
// whether or not the run was resumed in between (resume_or_start restores the sums).
double TrainLoop::take_logged_loss(double* samples) {
  double mean = 0;
  if (comm_->world() == 1) {
    mean = step_->take_loss();
  } else {
    // One small all-reduce per log record: the loss sum, its count and the samples trained.
    int64_t count = 0;
    double v[3] = {step_->loss_sum(&count), 0, samples ? *samples : 0};
    v[1] = static_cast<double>(count);
    step_->take_loss();
    comm_->all_reduce_sum(v, 3);
    mean = v[1] > 0 ? v[0] / v[1] : 0.0;
    if (samples) *samples = v[2];
  }
  state_.pending_loss_sum = 0;
  state_.pending_loss_count = 0;
  return mean;
}

double TrainLoop::time_s() const { return state_.time_s + seconds_since(start_); }

void TrainLoop::save_autotune_log() {
  Autotuner* tuner = tuner_.get();
  // A model without tunable layers (an MLP, a GPT) leaves the tuner empty: nothing to say.
  if (!tuner || !primary() || tuner->decisions().empty()) return;
  save_autotune_cache(run_, *tuner);
  for (const auto& line : tuner->log_lines()) observers_.on_note(line);
  observers_.on_note(fmt::format("autotune: {} decision(s), {:.0f} ms spent timing candidates",
                                 tuner->decisions().size(), tuner->tuning_ms()));
}

// Closes the profiling window: the spans into trace.json (primary rank; atomically), the ones
// that took the most time to the console.
void TrainLoop::end_profile() {
  const int64_t first = profile_from_, last = state_.micro_steps;
  const std::vector<trace::Event> events = profile_.stop();
  if (!primary()) return;
  const std::string json = trace::chrome_trace_json(events);
  write_file_atomic((run_ / "trace.json").string(), json);
  const double window_s = (profile_.stop_ns() - profile_.start_ns()) / 1e9;
  observers_.on_note(fmt::format("profile: micro-batches {}-{} ({:.3f} s) traced into {} ({} spans, {:.1f} MB{}); "
                                 "open it in Perfetto (ui.perfetto.dev) or chrome://tracing",
                                 first + 1, last, window_s, (run_ / "trace.json").string(), events.size(),
                                 json.size() / 1e6,
                                 profile_.dropped() ? fmt::format(", {} more dropped past the cap", profile_.dropped()) : ""));
  for (const std::string& line : trace::top_spans(events, window_s)) observers_.on_note("profile: " + line);
}

TrainSummary TrainLoop::finish() {
  if (profile_.active()) end_profile();  // a run shorter than its window
  {
    const auto t0 = Clock::now();
    writer_.wait();
    summary_.checkpoint_block_s += seconds_since(t0);
  }
  summary_.epochs = state_.epoch;
  summary_.steps = step_->updates();
  summary_.skipped_steps = scaler_ ? scaler_->skipped_total() : 0;
  summary_.signal = summary_.stopped_by == "signal" ? stop_signal_ : 0;
  summary_.best_val = state_.best_val_loss;
  summary_.monitor = config_.train.monitor;
  if (std::isfinite(state_.best_val))
    summary_.best_monitored = config_.train.monitor == "val_accuracy" ? -state_.best_val : state_.best_val;
  if (!stop_requested()) test_evaluation();
  summary_.time_s = time_s();
  write_summary_json();
  EndEvent end;
  end.summary = &summary_;
  end.run_dir = run_.string();
  end.time_s = time_s();
  if (scaler_) end.loss_scale = scaler_->scale();
  observers_.on_end(end);
  return summary_;
}

// summary.json: the end-of-run summary the console prints, kept with the run (written whole).
void TrainLoop::write_summary_json() {
  if (!primary()) return;
  write_file_atomic((run_ / "summary.json").string(), summary_json(summary_).dump(2) + "\n");
}

// With the best validated weights: the final `best` is the last state when nothing was
// validated (no val split, or train.eval_every 0).
// Every rank takes part: the primary reads `best` and broadcasts its weights, then the test split
// is evaluated as validation is (evaluate_split).
void TrainLoop::test_evaluation() {
  uint8_t write_best = !plan_.val || eval_every_.never() || (primary() && !fs::exists(ckpt_dir_ / "best"));
  comm_->broadcast_bytes(&write_best, 1);  // the primary's view of the run directory
  if (write_best) {
    checkpoint("best", state_.epoch, state_.batch_in_epoch, false);
    writer_.wait();
  }
  if (primary()) load_checkpoint((ckpt_dir_ / "best").string(), model_->params());
  comm_->broadcast(model_->params().params(), model_->params().size());
  if (!plan_.test) return;
  double accuracy = 0;
  nlohmann::json forecast;
  summary_.test_loss = evaluate_split(*plan_.test, plan_.windows ? &plan_.windows->test : nullptr, &accuracy,
                                       &forecast);
  if (plan_.classes > 0) summary_.test_accuracy = accuracy;
  summary_.test_forecast = forecast;
  EvalEvent e = eval_event("test", *summary_.test_loss);
  e.forecast = forecast;
  e.monitor = config_.train.monitor;
  // The epoch the last step trained in, as the last val record has it (state_.epoch is the
  // next epoch to train once an epoch is complete).
  if (state_.batch_in_epoch == 0 && state_.epoch > 0) e.epoch = state_.epoch - 1;
  if (plan_.classes > 0) e.accuracy = accuracy;
  observers_.on_eval(e);
}

}  // namespace seqtrain
