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

void AdamW::step(float* params, const float* grads, size_t n, double lr) {
  begin_step(params, grads, n, lr);
  const std::vector<GroupUpdate> updates = plan_updates(n);
  ++step_;
  // The backend forms the kernel's scalars (CpuBackend::adamw: in double, rounded to float once,
  // as torch does) and updates run by run of the decay mask; one call per parameter group (one
  // without groups), each with its elements' own step for the bias corrections.
  // Under train.zero only the shard's elements, the moments indexed from its first.
  const size_t at = shard_begin();
  for (const GroupUpdate& g : updates) {
    const std::vector<DecayRun> runs = shard_runs(g.runs);
    if (runs.empty()) continue;
    AdamWUpdate u;
    u.params = params + at;
    u.grads = grads + at;
    u.m = buffer(0);
    u.v = buffer(1);
    u.runs = &runs;
    u.lr = lr * g.lr_scale;
    u.beta1 = opts_.beta1;
    u.beta2 = opts_.beta2;
    u.eps = opts_.eps;
    u.weight_decay = g.weight_decay;
    u.step = g.steps + 1;
    backend().adamw(u);
  }
}

}  // namespace seqtrain
