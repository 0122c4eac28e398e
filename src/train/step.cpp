#include "train/step.h"
#include "core/trace.h"

#include <fmt/format.h>

#include <cstring>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "backend/backend.h"
#include "backend/clip_rule.h"
#include "backend/device_batch.h"
#include "nn/dropout.h"
#include "nn/grad_ready.h"
#include "train/grad_buckets.h"

namespace seqtrain {

TrainStep::TrainStep(Model& model, Optimizer& optimizer, LrSchedule& schedule, StepOptions options)
    : model_(model), optimizer_(optimizer), schedule_(schedule), options_(options) {
  ST_CHECK(options_.grad_accum >= 1, "train.grad_accum must be at least 1, got {}", options_.grad_accum);
  objective_ = options_.objective;
  if (!objective_) {
    // Classification's forward/backward take labels of any shape ([B] or [B, T]); the loss
    // computes where the model does.
    if (!options_.loss_options.backend) options_.loss_options.backend = &model_.params().backend();
    owned_objective_ = make_objective(options_.loss, options_.loss_options,
                                      options_.loss == LossKind::cross_entropy ? ObjectiveTask::classify
                                                                               : ObjectiveTask::forecast);
    objective_ = owned_objective_.get();
  }
  // Activations live where the parameters do (a device backend's memory on a GPU).
  arena_.set_backend(model_.params().backend());
  // A GPU's batches copy on its second stream, beside the previous step (backend/batch_landing.h).
  if (options_.copy_lane && model_.params().backend().has_copy_lane())
    landing_ = std::make_unique<BatchLanding>(model_.params().backend());
  // Three doubles (six floats; the backend aligns every buffer past a double's alignment).
  sums_ = DeviceBuffer(model_.params().backend(), 6, /*zero=*/true);
  // No norm before the first update (a first step skipped on overflow leaves it so), written
  // without a copy: two floats of bits 0x7ff80000 (a float NaN) side by side are a double NaN.
  model_.params().backend().fill(sums_.data() + 4, 2, std::bit_cast<float>(uint32_t{0x7ff80000}));
  model_.params().zero_grad();
  zero_ = options_.zero && options_.comm && options_.comm->world() > 1;
  if (zero_) {
    // The slice's clip and norm are read on the host (update_shard): a GPU run (NCCL) keeps
    // whole optimizer state for now.
    ST_CHECK(model_.params().backend().host_accessible(), "train.zero on the {} backend: not supported; set "
             "train.zero: 0 or runtime.device: cpu", model_.params().backend().name());
    const Slice s = slice_of(model_.params().size(), options_.comm->rank(), options_.comm->world());
    ST_CHECK(s.size() > 0, "train.zero: the model's {} parameters are fewer than the {} ranks; set train.zero: 0",
             model_.params().size(), options_.comm->world());
    optimizer_.set_shard(s.begin, s.end);
  }
  if (options_.scaler) {
    options_.scaler->use_backend(model_.params().backend());
    // The optimizer skips an overflowed step on the device where it can; train.zero's ranks agree
    // on the overflow of their slices on the host.
    if (optimizer_.device_scalars() && !zero_) optimizer_.set_skip_flag(options_.scaler->found_inf());
  }
  if (options_.graphs && model_.params().backend().supports_capture()) {
    const std::string why = uncapturable();
    if (why.empty()) graphs_ = std::make_unique<StepGraphs>(model_.params().backend(), options_.note);
    else if (options_.note) options_.note("runtime.cuda_graphs: the steps run uncaptured: " + why);
  }
}

std::string TrainStep::uncapturable() const {
  if (options_.grad_accum > 1)
    return "train.grad_accum > 1 (the accumulation's weights are host values that change between micro-batches)";
  if (options_.comm && options_.comm->world() > 1) return "several ranks (the gradient sum is a host collective)";
  if (!optimizer_.device_scalars())
    return fmt::format("train.optimizer.name {} (its update takes its scalars from the host)", optimizer_.name());
  if (objective_->host_loops()) return fmt::format("the {} loss runs as host loops", objective_->name());
  return "";
}

TrainStep::~TrainStep() {
  // The optimizer may outlive the scaler: its counts take the device's skips in and stop reading
  // the flag. A destructor cannot report a failed read; the counts are then what the host asked.
  if (options_.scaler && optimizer_.skip_flag() == options_.scaler->found_inf()) {
    try {
      optimizer_.set_skip_flag(nullptr);
    } catch (const Error&) {
    }
  }
}

bool TrainStep::device_skip() const { return options_.scaler && optimizer_.skip_flag(); }

// The step's values where reading them costs nothing (host-accessible memory); NaN elsewhere.
void TrainStep::read_free(StepResult& r) {
  const bool free = model_.params().backend().host_accessible();
  r.grad_norm = free ? sums()[2] : std::numeric_limits<double>::quiet_NaN();
  if (free && device_skip() && *options_.scaler->found_inf() != 0.f) {
    r.skipped = true;
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
}

bool TrainStep::overlap() const {
  if (!options_.comm || options_.comm->world() == 1 || options_.bucket == 0) return false;
  for (const ParamEntry& e : model_.params().entries())
    if (e.frozen) return false;
  return true;
}

// Collective: the total count (one small all-reduce, the one the boundary makes otherwise),
// then the buckets, ready for the backward's reports.
void TrainStep::begin_buckets() {
  double total = static_cast<double>(accum_count_);
  options_.comm->all_reduce_sum(&total, 1);
  // normalize_accumulated's factor, applied per bucket as it leaves.
  const double scale = reference_ > 0 && total > 0 && reference_ != total ? reference_ / total : 1.0;
  ParamStore& ps = model_.params();
  buckets_ = std::make_unique<GradBuckets>(*options_.comm, ps.backend(), ps.grads(), ps.size(), options_.bucket, scale,
                                           /*scatter=*/zero_);
}

void TrainStep::grow_reference(int64_t count) {
  const double r = static_cast<double>(count) * static_cast<double>(options_.grad_accum);
  if (r <= reference_) return;
  if (reference_ > 0) scale_grads(reference_ / r);  // the earlier micro-batches were weighted by 1/old R
  reference_ = r;
}

void TrainStep::normalize_accumulated(double total) {
  if (reference_ > 0 && total > 0 && reference_ != total) scale_grads(reference_ / total);
  accum_count_ = 0;
  reference_ = 0;
}

void TrainStep::scale_grads(double factor) {
  ParamStore& ps = model_.params();
  ps.backend().scale(ps.grads(), ps.size(), static_cast<float>(factor));
}

StepResult TrainStep::run(const Tensor& inputs, const Tensor& targets, uint64_t seed) {
  Batch batch = batch_of(inputs);
  batch.targets = targets;
  return run(batch, seed);
}

StepResult TrainStep::run(const Batch& host_batch, uint64_t seed) {
  // The batch goes up first, beside the previous step's work, before this step queues or waits
  // for anything (backend/batch_landing.h).
  if (landing_ && host_batch.count > 0) landing_->land(host_batch);
  if (graphs_ && host_batch.count > 0)
    if (StepGraphs::Entry* e = graphs_->entry(host_batch)) return run_graph(*e, host_batch, seed);
  // A data-parallel rank whose shard of a short last batch is empty computes nothing and still
  // joins the accumulation's reductions below.
  if (host_batch.count > 0) compute(host_batch, seed);
  return finish_micro_batch();
}

StepResult TrainStep::run_graph(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed) {
  using State = StepGraphs::Entry::State;
  switch (e.state) {
    case State::captured: return replay(e, host_batch, seed);
    case State::ready: return capture(e, host_batch, seed);
    case State::warming: {  // sizes the arenas, plans and workspaces: the capture then allocates nothing
      bool host_values = false;
      pass(stage(host_batch, seed), host_batch, &host_values);
      if (host_values) graphs_->refuse(e, "the model's regulariser adds a host value to the loss");
      else if (++e.warm == StepGraphs::kWarmSteps) e.state = State::ready;
      return finish_micro_batch();
    }
    case State::refused: break;
  }
  compute(host_batch, seed);
  return finish_micro_batch();
}

// The optimizer's host half runs once, before the capture: a failed capture leaves the step to
// run uncaptured on the same prepared scalars, with the host's counts put back as they were.
StepResult TrainStep::capture(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed) {
  ParamStore& ps = model_.params();
  Backend& be = ps.backend();
  optimizer_.prepare(ps.params(), ps.grads(), ps.size(), schedule_.lr(updates_));
  const Batch batch = stage(host_batch, seed);
  const int64_t loss_count = loss_count_, accum_count = accum_count_, micro = micro_, updates = updates_;
  const double reference = reference_;
  const bool norm_valid = norm_valid_;
  StepResult r;
  Tensor pred;
  be.begin_capture();
  try {
    pred = pass(batch, host_batch);
    r = finish_micro_batch(Queue::apply);
    e.id = be.end_capture();
  } catch (const Error& err) {
    be.abort_capture();
    loss_count_ = loss_count;
    accum_count_ = accum_count;
    micro_ = micro;
    updates_ = updates;
    reference_ = reference;
    norm_valid_ = norm_valid;
    graphs_->refuse(e, fmt::format("its capture failed: {}", err.what()));
    pass(stage(host_batch, seed), host_batch);
    return finish_micro_batch(Queue::apply);
  }
  e.state = StepGraphs::Entry::State::captured;
  e.count = loss_count_ - loss_count;
  e.plan = optimizer_.plan();
  e.pred = pred;
  graphs_->count_capture();
  // A capture records and runs nothing: its first replay is this step.
  ST_CHECK(be.replay(e.id), "internal error: {} refused the replay of a capture it just made", be.name());
  graphs_->count_replay();
  read_free(r);  // read above before the replay wrote them
  return r;
}

// The host half of a step (forward's checks, the targets' count, the optimizer's scalars, the
// batch staged at the capture's addresses), then the capture's launch in place of the device work.
StepResult TrainStep::replay(StepGraphs::Entry& e, const Batch& host_batch, uint64_t seed) {
  ParamStore& ps = model_.params();
  model_.check_batch(host_batch);
  const int64_t count = objective_->count(e.pred, host_batch);
  optimizer_.prepare(ps.params(), ps.grads(), ps.size(), schedule_.lr(updates_));
  const Batch batch = stage(host_batch, seed);
  if (count != e.count) {
    graphs_->refuse(e, "its batches count different numbers of targets (a loss mask, ignored labels), and the "
                    "loss gradient's weight is a host value");
  } else if (optimizer_.plan() != e.plan || !ps.backend().replay(e.id)) {
    graphs_->forget(e);  // other updates, or memory moved: captured again at the shape's next step
  } else {
    graphs_->count_replay();
    count_in(count);
    return finish_micro_batch(Queue::none);
  }
  pass(batch, host_batch);
  return finish_micro_batch(Queue::apply);
}

void TrainStep::compute(const Batch& host_batch, uint64_t seed) { pass(stage(host_batch, seed), host_batch); }

Batch TrainStep::stage(const Batch& host_batch, uint64_t seed) {
  arena_.reset();
  ST_TRACE("step.upload", "step");
  Backend& be = model_.params().backend();
  if (!graphs_) {
    mask_seed_ = DropoutSeed(seed);
    return landing_ ? landing_->landed() : device_batch(host_batch, arena_, be);
  }
  Batch staged = landing_ ? landing_->staged(arena_) : staged_batch(host_batch, arena_, be);
  // The masks' seed goes up with the batch, at the same address each step of a shape: a replay's
  // masks mix it as they run (backend/dropout_seed.h), the same bits as the host's mix.
  auto* slot = static_cast<uint64_t*>(arena_.alloc(sizeof seed));
  be.upload(&seed, slot, sizeof seed);
  mask_seed_ = DropoutSeed::at(slot);
  return staged;
}

void TrainStep::count_in(int64_t count) {
  loss_count_ += count;
  accum_count_ += count;
  grow_reference(count);
}

Tensor TrainStep::pass(const Batch& batch, const Batch& host_batch, bool* host_values) {
  // Dropout and attention masks keyed by the global rows of a data-parallel shard (nn/dropout.h).
  const PassRows rows(host_batch.rows, host_batch.count);
  StepContext ctx(arena_, /*training=*/true, mask_seed_);
  ctx.host_batch = &host_batch;
  Tensor pred = [&] {
    ST_TRACE("step.forward", "step");
    return model_.forward(batch, ctx);
  }();
  ST_TRACE("step.loss_backward", "step");  // the rest of the micro-batch: loss, backward, update
  const int64_t count = objective_->count(pred, host_batch);
  objective_->accumulate(pred, batch, sums());
  if (ctx.aux_loss != 0) add_aux_loss(ctx.aux_loss * static_cast<double>(count));
  if (host_values) *host_values = ctx.aux_loss != 0;
  count_in(count);
  // The gradient of this micro-batch's loss sum, weighted by scale / R (see step.h): with equal
  // micro-batches that is the gradient of its mean / grad_accum, as backward of
  // scaler.scale(loss / k) in a PyTorch loop. Under fp16 the scale is the loss scaler's, in the
  // backend's memory. Where the step may be captured or the memory is not the host's, the
  // weight is 1 / R and the scale multiplies the gradient where it lives: the same floats
  // whenever the scale is a power of two, which only shifts exponents (GradScaler's defaults
  // keep it one). Elsewhere (cpu, reference) the host reads the scale for free and folds it into
  // the weight, the bits of any scale as before.
  const bool scale_on_device = options_.scaler && (graphs_ || !model_.params().backend().host_accessible());
  const double scale = options_.scaler && !scale_on_device ? options_.scaler->scale() : 1.0;
  Tensor dpred = arena_.tensor(pred.shape);
  const double per_target = reference_ > 0 ? scale / reference_ : 0.0;
  objective_->backward(pred, batch, dpred, per_target, /*targets_checked=*/true);
  if (scale_on_device) options_.scaler->scale_grad(dpred.f32(), static_cast<size_t>(dpred.numel()));
  ctx.output_grad = dpred;
  // A regulariser is a host value (host-accessible backends only): its weight reads the scale.
  const double aux_scale = scale_on_device && ctx.aux_loss != 0 ? options_.scaler->scale() : scale;
  ctx.aux_weight = (reference_ > 0 ? aux_scale / reference_ : 0.0) * static_cast<double>(count);
  // The accumulation's last micro-batch: its backward starts the gradient buckets' sums.
  if (micro_ + 1 == options_.grad_accum && overlap()) begin_buckets();
  {
    ST_TRACE("step.backward", "step");
    // Only while buckets wait for the reports (an outer scope, a test's, stays otherwise).
    std::optional<GradReadyScope> ready;
    if (buckets_) ready.emplace(buckets_.get());
    model_.backward(ctx);
  }
  // A frozen tensor gets no gradient from a micro-batch that ran while it was frozen (torch:
  // requires_grad False), whatever the model's backward added to it.
  model_.params().zero_frozen_grads();
  scratch_bytes_ = ctx.scratch_bytes;
  return pred;
}

StepResult TrainStep::finish_micro_batch(Queue queue) {
  StepResult r;
  if (++micro_ < options_.grad_accum) return r;
  micro_ = 0;
  ParamStore& ps = model_.params();
  // The one place gradients cross ranks, after the last micro-batch and before anything reads
  // them: every rank divides by the count of targets over all ranks, then the gradients are
  // summed, so ranks that hold different counts (a short last batch) average exactly.
  if (overlap()) {
    if (!buckets_) begin_buckets();  // this rank's shard had nothing to compute
    buckets_->finish();              // every bucket summed (zero: this rank's slice): as below
    buckets_.reset();
    accum_count_ = 0;
    reference_ = 0;
  } else {
    double total = static_cast<double>(accum_count_);
    if (options_.comm && options_.comm->world() > 1) options_.comm->all_reduce_sum(&total, 1);
    normalize_accumulated(total);
  }
  r.lr = schedule_.lr(updates_);
  if (zero_) {
    if (!overlap()) options_.comm->reduce_scatter_sum(ps.grads(), ps.size());  // else the buckets did
    const bool finite = update_shard(r);
    ps.zero_grad();
    ++updates_;
    r.updated = true;
    if (finite) options_.comm->all_gather(ps.params(), ps.size());  // every rank's updated slice
    return r;
  }
  if (options_.comm && !overlap()) options_.comm->all_reduce_sum(ps.grads(), ps.size());
  // fp16: an optimizer that skips on the device reads the overflow flag there, as clipping does;
  // another reads it back and the host skips.
  if (options_.scaler && queue != Queue::none) options_.scaler->unscale(ps.grads(), ps.size());
  if (options_.scaler && !device_skip()) {
    const bool finite = !options_.scaler->overflowed();
    options_.scaler->update();
    if (!finite) {
      r.skipped = true;
      r.grad_norm = std::numeric_limits<double>::quiet_NaN();
      ps.zero_grad();
      ++updates_;
      r.updated = true;
      return r;
    }
  }
  ST_CHECK(options_.grad_clip >= 0 && std::isfinite(options_.grad_clip),
           "gradient clipping max_norm = {} is invalid; use a finite value > 0, or 0 to turn clipping off",
           options_.grad_clip);
  {
    ST_TRACE("step.clip", "step");
    const float* skip = device_skip() ? options_.scaler->found_inf() : nullptr;
    if (queue != Queue::none) ps.backend().clip_grad_norm_into(ps.grads(), ps.size(), options_.grad_clip, sums() + 2, skip);
  }
  norm_valid_ = true;
  {
    ST_TRACE("step.optimizer", "step");
    if (queue == Queue::step) optimizer_.step(ps.params(), ps.grads(), ps.size(), r.lr);
    else if (queue == Queue::apply) optimizer_.apply();
  }
  if (device_skip() && queue != Queue::none) options_.scaler->update();
  if (queue != Queue::none) ps.zero_grad();
  ++updates_;
  r.updated = true;
  read_free(r);
  return r;
}

bool TrainStep::update_shard(StepResult& r) {
  ParamStore& ps = model_.params();
  Backend& be = ps.backend();
  Communicator& comm = *options_.comm;
  const Slice s = slice_of(ps.size(), comm.rank(), comm.world());
  float* g = ps.grads() + s.begin;
  if (options_.scaler) {
    // Skipped on every rank or on none: the ranks agree on the overflow of any slice.
    double overflow = options_.scaler->unscale_finite(g, s.size()) ? 0.0 : 1.0;
    comm.all_reduce_sum(&overflow, 1);
    options_.scaler->update(overflow > 0);
    if (overflow > 0) {
      r.skipped = true;
      r.grad_norm = std::numeric_limits<double>::quiet_NaN();
      return false;
    }
  }
  ST_CHECK(options_.grad_clip >= 0 && std::isfinite(options_.grad_clip),
           "gradient clipping max_norm = {} is invalid; use a finite value > 0, or 0 to turn clipping off",
           options_.grad_clip);
  {
    ST_TRACE("step.clip", "step");
    // The global norm from the slices' sums of squares (summed in rank order, as every sum).
    const double part = be.l2_norm(g, s.size());
    double squares = part * part;
    comm.all_reduce_sum(&squares, 1);
    const double total = std::sqrt(squares);
    sums()[2] = total;
    const double coef = clip_coefficient(total, options_.grad_clip);
    if (coef < 1.0) be.scale(g, s.size(), static_cast<float>(coef));
  }
  norm_valid_ = true;
  r.grad_norm = sums()[2];
  {
    ST_TRACE("step.optimizer", "step");
    optimizer_.step(ps.params(), ps.grads(), ps.size(), r.lr);  // the shard's elements only
  }
  return true;
}

// A model's regulariser (StepContext::aux_loss) joins the loss sum: a host value, so only where
// the host reads the sums (the models that have one refuse a device backend before this).
void TrainStep::add_aux_loss(double sum) {
  ST_CHECK(model_.params().backend().host_accessible(), "a model regulariser on the {} backend: not supported",
           model_.params().backend().name());
  sums()[0] += sum;
}

// One read of the loss sum (a synchronization on a GPU), then the sums restart from 0.
double TrainStep::take_loss(int64_t* count) {
  Backend& be = model_.params().backend();
  double held[2] = {0, 0};
  read_sums(0, held, 2);
  const double mean = loss_count_ ? held[0] / static_cast<double>(loss_count_) : 0.0;
  if (count) *count = loss_count_;
  if (held[0] != 0 || held[1] != 0) be.fill(sums_.data(), 4, 0.f);  // the two doubles' bits
  loss_count_ = 0;
  return mean;
}

double TrainStep::loss_sum(int64_t* count) {
  double held = 0;
  read_sums(0, &held, 1);
  *count = loss_count_;
  return held;
}

void TrainStep::restore_loss(double sum, int64_t count) {
  float bits[2];
  std::memcpy(bits, &sum, sizeof sum);  // sums_ holds doubles in f32-sized slots
  sums_.upload(std::span<const float>(bits, 2), 0);
  loss_count_ = count;
}

double TrainStep::grad_norm() {
  if (!norm_valid_) return std::numeric_limits<double>::quiet_NaN();
  double norm = 0;
  read_sums(2, &norm, 1);
  return norm;
}

// Directly where the host may read the backend's memory, else one copy.
void TrainStep::read_sums(int first, double* out, int n) {
  Backend& be = model_.params().backend();
  if (be.host_accessible()) std::copy(sums() + first, sums() + first + n, out);
  else be.copy_to_host(sums() + first, out, sizeof(double) * static_cast<size_t>(n));
}

}  // namespace seqtrain
