#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace seqtrain {

namespace {
// A zero skip counter: the double 0.0 as the two floats of its slot.
constexpr float kNoSkips[2] = {0.f, 0.f};

// Runs that must tile [0, n) in order (n = 0: any length); `what` names them in the error.
template <typename Run>
void check_tiling(const std::vector<Run>& runs, size_t n, std::string_view opt, const char* what) {
  size_t at = 0;
  for (const Run& r : runs) {
    ST_CHECK(r.begin == at && r.end > r.begin, "{} optimizer: {} [{}, {}) does not continue at element {}; the runs "
             "must cover the parameters in order", opt, what, r.begin, r.end, at);
    at = r.end;
  }
  ST_CHECK(runs.empty() || n == 0 || at == n, "{} optimizer: {} cover {} elements but the optimizer updates {}", opt,
           what, at, n);
}
}  // namespace

OptimizerState Optimizer::state() const {
  ST_CHECK(!sharded(), "internal error: the {} optimizer keeps elements [{}, {}) only (train.zero); its whole state "
           "is gathered over the ranks", name(), shard_begin_, shard_end_);
  return shard_state();
}

void Optimizer::set_shard(size_t begin, size_t end) {
  ST_CHECK(name() == "adamw", "train.zero shards AdamW's moments, and this optimizer is {}; set train.zero: 0 or "
           "train.optimizer.name: adamw", name());
  ST_CHECK(begin < end, "internal error: an empty optimizer shard [{}, {})", begin, end);
  ST_CHECK(buffers_.empty(), "internal error: set_shard after the {} optimizer's first step", name());
  shard_begin_ = begin;
  shard_end_ = end;
}

std::vector<Optimizer::DecayRun> Optimizer::shard_runs(const std::vector<DecayRun>& runs) const {
  if (!sharded()) return runs;
  std::vector<DecayRun> out;
  for (const DecayRun& r : runs) {
    const size_t b = std::max(r.begin, shard_begin_), e = std::min(r.end, shard_end_);
    if (b < e) out.push_back({b - shard_begin_, e - shard_begin_, r.decay});
  }
  return out;
}

OptimizerState Optimizer::shard_state() const {
  OptimizerState s;
  const int64_t skips = device_skips();
  s.step = step_ - skips;
  s.param_steps = counts_less(skips);
  if (!buffers_.empty()) {
    std::vector<std::string> names = buffer_names();
    for (size_t i = 0; i < names.size(); ++i) {
      std::vector<float>& host = s.buffers[names[i]];
      host.resize(buffers_[i].size());
      buffers_[i].download(host);
    }
  }
  return s;
}

void Optimizer::load_state(const OptimizerState& s) {
  ST_CHECK(s.step >= 0, "{} optimizer state has a negative step count ({})", name(), s.step);
  std::vector<std::string> names = buffer_names();
  for (const StepCount& c : s.param_steps)
    ST_CHECK(c.steps >= 0 && c.steps <= s.step, "{} optimizer state gives elements [{}, {}) {} updates, outside "
             "[0, {}] (its step count); the checkpoint is inconsistent", name(), c.begin, c.end, c.steps, s.step);
  if (s.buffers.empty() && (s.step == 0 || names.empty())) {
    // Nothing to restore but the counts: a checkpoint taken before the first step, or an
    // optimizer (SGD without momentum) that keeps no buffers.
    check_tiling(s.param_steps, 0, name(), "update counts");
    step_ = s.step;
    param_steps_ = s.param_steps;
    buffers_.clear();
    n_ = 0;
    if (skip_flag_) clear_skips();
    return;
  }
  std::string expected;
  for (const auto& nm : names) expected += (expected.empty() ? "" : ", ") + nm;
  for (const auto& [nm, buf] : s.buffers) {
    bool known = false;
    for (const auto& e : names) known = known || e == nm;
    ST_CHECK(known, "{} optimizer state has an unexpected buffer '{}' (expected: {}); was the "
             "checkpoint written by a different optimizer?", name(), nm, expected.empty() ? "none" : expected);
  }
  std::vector<const std::vector<float>*> loaded;
  size_t n = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = s.buffers.find(names[i]);
    ST_CHECK(it != s.buffers.end(), "{} optimizer state at step {} lacks buffer '{}' (expected: {})",
             name(), s.step, names[i], expected);
    if (i == 0) n = it->second.size();
    ST_CHECK(it->second.size() == n, "{} optimizer state buffer '{}' has {} elements but '{}' has {}; "
             "the checkpoint is inconsistent", name(), names[i], it->second.size(), names[0], n);
    loaded.push_back(&it->second);
  }
  ST_CHECK(decay_mask_.empty() || decay_mask_.size() == n,
           "{} optimizer state holds {} elements but the weight-decay mask has {}", name(), n, decay_mask_.size());
  check_tiling(s.param_steps, n, name(), "update counts");
  ST_CHECK(groups_.empty() || groups_.back().end == n, "{} optimizer state holds {} elements but the parameter "
           "groups cover {}", name(), n, groups_.back().end);
  ST_CHECK(!sharded() || shard_end_ <= n, "{} optimizer state holds {} elements but this rank's shard "
           "(train.zero) is [{}, {})", name(), n, shard_begin_, shard_end_);
  std::vector<DeviceBuffer> device;
  for (const std::vector<float>* host : loaded) {
    if (sharded()) {  // the shard's part of the whole state
      device.emplace_back(*backend_, shard_end_ - shard_begin_, /*zero=*/false);
      device.back().upload(std::span<const float>(host->data() + shard_begin_, shard_end_ - shard_begin_));
    } else {
      device.emplace_back(*backend_, n, /*zero=*/false);
      device.back().upload(*host);
    }
  }
  buffers_ = std::move(device);
  n_ = n;
  step_ = s.step;
  param_steps_ = s.param_steps;
  if (skip_flag_) clear_skips();
}

void Optimizer::reset() {
  step_ = 0;
  n_ = 0;
  buffers_.clear();
  param_steps_.clear();
  if (skip_flag_) clear_skips();
}

void Optimizer::clear_skips() {
  skips_folded_ = 0;
  skips_.upload(std::span<const float>(kNoSkips, 2));
}

void Optimizer::set_skip_flag(const float* flag) {
  ST_CHECK(!flag || device_scalars(), "internal error: the {} optimizer takes its scalars from the host; it cannot "
           "skip an update on the device", name());
  if (skip_flag_) fold_skips();  // the counts so far keep the skips of the flag before
  skip_flag_ = flag;
  skips_folded_ = 0;
  skips_ = flag ? DeviceBuffer(*backend_, 2, /*zero=*/true) : DeviceBuffer();
}

int64_t Optimizer::device_skips() const {
  if (!skip_flag_) return 0;
  double skips = 0;
  backend_->copy_to_host(skips_.data(), &skips, sizeof skips);
  return static_cast<int64_t>(skips - skips_folded_);
}

// Empty when every element has had the same count (param_steps_'s convention): then no range was
// frozen since the last fold, and all of them lose the skips.
std::vector<StepCount> Optimizer::counts_less(int64_t skips) const {
  std::vector<StepCount> out = param_steps_;
  size_t g = 0;
  for (StepCount& c : out) {
    while (g < groups_.size() && groups_[g].end <= c.begin) ++g;
    if (!(g < groups_.size() && groups_[g].frozen)) c.steps -= skips;
  }
  return out;
}

void Optimizer::fold_skips() {
  const int64_t skips = device_skips();
  if (skips == 0) return;
  param_steps_ = counts_less(skips);
  step_ -= skips;
  skips_folded_ += static_cast<double>(skips);
}

void Optimizer::set_groups(std::vector<GroupRun> runs) {
  check_tiling(runs, n_, name(), "parameter group runs");
  for (const GroupRun& r : runs) {
    ST_CHECK(std::isfinite(r.lr_scale) && r.lr_scale >= 0, "{} optimizer: a parameter group's lr_scale is {}; it "
             "must be finite and >= 0", name(), r.lr_scale);
    ST_CHECK(!r.weight_decay || (std::isfinite(*r.weight_decay) && *r.weight_decay >= 0), "{} optimizer: a "
             "parameter group's weight_decay is {}; it must be finite and >= 0", name(), r.weight_decay.value_or(0));
  }
  if (runs != groups_) fold_skips();  // the skips so far fall on the ranges the old groups updated
  groups_ = std::move(runs);
}

std::vector<StepCount> Optimizer::param_steps(size_t n) const {
  if (const int64_t skips = device_skips()) {
    std::vector<StepCount> c = counts_less(skips);
    return c.empty() ? std::vector<StepCount>{StepCount{0, n, step_ - skips}} : c;
  }
  if (param_steps_.empty()) return {StepCount{0, n, step_}};
  return param_steps_;
}

// One sweep over the pieces where none of the three run lists (decay mask, groups, counts)
// changes; pieces of one (lr scale, weight decay, count) go to one update.
std::vector<Optimizer::GroupUpdate> Optimizer::plan_updates(size_t n) {
  const std::vector<DecayRun> decay = decay_runs(n);
  const std::vector<GroupRun> groups = groups_.empty() ? std::vector<GroupRun>{GroupRun{0, n, 1.0, std::nullopt, false}} : groups_;
  // The host's counts (skips the device counted since the last fold are not taken off: the device
  // does that when it forms t).
  const std::vector<StepCount> counts = param_steps_.empty() ? std::vector<StepCount>{StepCount{0, n, step_}} : param_steps_;
  const double wd = opts_.weight_decay.value_or(0.0);
  std::vector<GroupUpdate> updates;
  std::vector<StepCount> after;
  bool uniform = true;  // every element updated this step, from one count
  size_t i = 0, j = 0, k = 0;
  for (size_t at = 0; at < n;) {
    const DecayRun& d = decay[i];
    const GroupRun& g = groups[j];
    const StepCount& c = counts[k];
    const size_t end = std::min({d.end, g.end, c.end});
    const int64_t now = g.frozen ? c.steps : c.steps + 1;
    uniform = uniform && !g.frozen && c.steps == step_;
    if (!after.empty() && after.back().steps == now) after.back().end = end;
    else after.push_back({at, end, now});
    if (!g.frozen) {
      const double run_wd = g.weight_decay.value_or(wd);
      const bool flag = g.weight_decay ? true : d.decay;
      GroupUpdate* u = nullptr;
      for (GroupUpdate& x : updates)
        if (x.lr_scale == g.lr_scale && x.weight_decay == run_wd && x.steps == c.steps) u = &x;
      if (!u) {
        updates.push_back(GroupUpdate{g.lr_scale, run_wd, c.steps, {}});
        u = &updates.back();
      }
      if (!u->runs.empty() && u->runs.back().end == at && u->runs.back().decay == flag) u->runs.back().end = end;
      else u->runs.push_back({at, end, flag});
    }
    at = end;
    if (d.end == end) ++i;
    if (g.end == end) ++j;
    if (c.end == end) ++k;
  }
  if (uniform) param_steps_.clear();  // all at step_ + 1, which step() is about to make step_
  else param_steps_ = std::move(after);
  return updates;
}

void Optimizer::set_decay_mask(std::vector<uint8_t> mask) {
  ST_CHECK(mask.empty() || n_ == 0 || mask.size() == n_,
           "weight-decay mask has {} elements but the optimizer updates {} parameters", mask.size(), n_);
  decay_mask_ = std::move(mask);
  runs_.clear();
  for (size_t i = 0; i < decay_mask_.size(); ++i) {
    const bool d = decay_mask_[i] != 0;
    if (runs_.empty() || runs_.back().decay != d) runs_.push_back({i, i, d});
    runs_.back().end = i + 1;
  }
}

std::vector<Optimizer::DecayRun> Optimizer::decay_runs(size_t n) const {
  if (decay_mask_.empty()) return {DecayRun{0, n, true}};
  return runs_;
}

void Optimizer::begin_step(const float* params, const float* grads, size_t n, double lr) {
  ST_CHECK(n == 0 || (params && grads), "{} step got a null parameter or gradient buffer", name());
  ST_CHECK(std::isfinite(lr) && lr >= 0, "{} step got learning rate {}; it must be finite and >= 0", name(), lr);
  ST_CHECK(decay_mask_.empty() || decay_mask_.size() == n,
           "{} step over {} parameters but the weight-decay mask has {} elements", name(), n, decay_mask_.size());
  if (buffers_.empty()) {
    size_t nb = buffer_names().size();
    ST_CHECK(!sharded() || shard_end_ <= n, "{} step over {} parameters but this rank's shard (train.zero) is "
             "[{}, {})", name(), n, shard_begin_, shard_end_);
    const size_t len = sharded() ? shard_end_ - shard_begin_ : n;
    for (size_t i = 0; i < nb; ++i) buffers_.emplace_back(*backend_, len);
    n_ = n;
  }
  ST_CHECK(n == n_, "{} step over {} parameters but the optimizer state holds {}; the parameter "
           "buffer changed size after the first step (or the checkpoint is from another model)", name(), n, n_);
  ST_CHECK(groups_.empty() || groups_.back().end == n, "{} step over {} parameters but the parameter groups cover {}",
           name(), n, groups_.back().end);
  ST_CHECK(param_steps_.empty() || param_steps_.back().end == n, "{} step over {} parameters but the update "
           "counts cover {}", name(), n, param_steps_.back().end);
}

void Optimizer::prepare(float* params, const float* grads, size_t n, double lr) {
  (void)params; (void)grads; (void)n; (void)lr;
  fail("internal error: the {} optimizer takes its scalars from the host; it cannot update a captured step", name());
}

void Optimizer::apply() {
  fail("internal error: the {} optimizer takes its scalars from the host; it cannot update a captured step", name());
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& opts, Backend& backend) {
  if (opts.name == "adamw") return std::make_unique<AdamW>(opts, backend);
  if (opts.name == "sgd") return std::make_unique<SGD>(opts, backend);
  fail("unknown optimizer '{}'; expected one of: adamw, sgd", opts.name);
}

}  // namespace seqtrain
