#include "optim/adamw.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace seqtrain {

AdamW::AdamW(OptimizerOptions opts, Backend& backend)
    : Optimizer("adamw", {"exp_avg", "exp_avg_sq"}, std::move(opts), backend) {
  if (!opts_.weight_decay) opts_.weight_decay = 0.01;  // torch.optim.AdamW's default
  const OptimizerOptions& o = opts_;
  ST_CHECK(std::isfinite(o.lr) && o.lr >= 0, "optimizer lr = {} is invalid; it must be finite and >= 0", o.lr);
  ST_CHECK(o.beta1 >= 0 && o.beta1 < 1, "optimizer beta1 = {} is out of range; adamw needs 0 <= beta1 < 1", o.beta1);
  ST_CHECK(o.beta2 >= 0 && o.beta2 < 1, "optimizer beta2 = {} is out of range; adamw needs 0 <= beta2 < 1", o.beta2);
  ST_CHECK(std::isfinite(o.eps) && o.eps >= 0, "optimizer eps = {} is invalid; adamw needs a finite eps >= 0", o.eps);
  ST_CHECK(std::isfinite(*o.weight_decay) && *o.weight_decay >= 0,
           "optimizer weight_decay = {} is invalid; it must be finite and >= 0", *o.weight_decay);
}

std::vector<AdamW::Pending> AdamW::plan_step(float* params, const float* grads, size_t n, double lr) {
  begin_step(params, grads, n, lr);
  const std::vector<GroupUpdate> updates = plan_updates(n);
  ++step_;
  // The backend forms the kernel's scalars (CpuBackend::adamw: in double, rounded to float once,
  // as torch does) and updates run by run of the decay mask; one call per parameter group (one
  // without groups), each with its elements' own step for the bias corrections.
  // Under train.zero only the shard's elements, the moments indexed from its first.
  const size_t at = shard_begin();
  std::vector<Pending> out;
  for (const GroupUpdate& g : updates) {
    std::vector<DecayRun> runs = shard_runs(g.runs);
    if (runs.empty()) continue;
    AdamWUpdate u;
    u.params = params + at;
    u.grads = grads + at;
    u.m = buffer(0);
    u.v = buffer(1);
    u.lr = lr * g.lr_scale;
    u.beta1 = opts_.beta1;
    u.beta2 = opts_.beta2;
    u.eps = opts_.eps;
    u.weight_decay = g.weight_decay;
    u.step = g.steps + 1;
    out.push_back({u, std::move(runs)});
  }
  return out;
}

void AdamW::step(float* params, const float* grads, size_t n, double lr) {
  if (skip_flag()) {  // the skip and t are the device's
    prepare(params, grads, n, lr);
    apply();
    return;
  }
  for (Pending& p : plan_step(params, grads, n, lr)) {
    p.u.runs = &p.runs;
    backend().adamw(p.u);
  }
}

// Each update's hyperparameters and host count go up with Backend::upload (queued ahead of the
// (replayed) step on a GPU, where the host need not wait for the previous step); apply() has
// the device form t and the scalars from them with adamw_scalars_at, the function step() uses on
// the host, so the two paths update alike, bit for bit.
void AdamW::prepare(float* params, const float* grads, size_t n, double lr) {
  std::vector<Pending> next = plan_step(params, grads, n, lr);
  std::vector<AdamWDeviceStep> host;
  for (const Pending& p : next) {
    AdamWDeviceStep d;
    d.lr = p.u.lr;
    d.beta1 = p.u.beta1;
    d.beta2 = p.u.beta2;
    d.eps = p.u.eps;
    d.weight_decay = p.u.weight_decay;
    d.step = static_cast<double>(p.u.step) + skips_folded();
    host.push_back(d);
  }
  constexpr size_t kFloats = sizeof(AdamWDeviceStep) / sizeof(float);
  static_assert(sizeof(AdamWDeviceStep) % sizeof(float) == 0);
  if (steps_.size() < host.size() * kFloats) steps_ = DeviceBuffer(backend(), host.size() * kFloats, false);
  if (!host.empty()) backend().upload(host.data(), steps_.data(), host.size() * sizeof(AdamWDeviceStep));
  // Another layout of updates (pointers, counts, runs) than the last: a new plan.
  bool same = next.size() == pending_.size();
  for (size_t i = 0; same && i < next.size(); ++i) {
    const AdamWUpdate &a = next[i].u, &b = pending_[i].u;
    same = a.params == b.params && a.grads == b.grads && a.m == b.m && a.v == b.v && next[i].runs == pending_[i].runs;
  }
  if (!same) ++plan_;
  pending_ = std::move(next);
  for (size_t i = 0; i < pending_.size(); ++i) {
    pending_[i].u.device = reinterpret_cast<const AdamWDeviceStep*>(steps_.data()) + i;
    pending_[i].u.skip = skip_flag();
  }
}

// The device's t and scalars first (after the step's unscale has set the skip flag), then the
// updates reading them.
void AdamW::apply() {
  backend().adamw_prepare(reinterpret_cast<AdamWDeviceStep*>(steps_.data()), pending_.size(), skip_flag(),
                          device_skip_counter());
  for (Pending& p : pending_) {
    p.u.runs = &p.runs;
    backend().adamw(p.u);
  }
}

}  // namespace seqtrain
