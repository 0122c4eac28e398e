#include "optim/sgd.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace seqtrain {

// The momentum buffer exists only with momentum, as torch's state has no entry without it.
static std::vector<std::string> sgd_buffers(double momentum) {
  if (momentum == 0) return {};
  return {"momentum_buffer"};
}

SGD::SGD(OptimizerOptions opts, Backend& backend) : Optimizer("sgd", sgd_buffers(opts.momentum), std::move(opts), backend) {
  if (!opts_.weight_decay) opts_.weight_decay = 0.0;  // torch.optim.SGD's default
  const OptimizerOptions& o = opts_;
  ST_CHECK(std::isfinite(o.lr) && o.lr >= 0, "optimizer lr = {} is invalid; it must be finite and >= 0", o.lr);
  ST_CHECK(std::isfinite(o.momentum) && o.momentum >= 0,
           "optimizer momentum = {} is invalid; sgd needs a finite momentum >= 0", o.momentum);
  ST_CHECK(std::isfinite(o.dampening), "optimizer dampening = {} is invalid; it must be finite", o.dampening);
  ST_CHECK(std::isfinite(*o.weight_decay) && *o.weight_decay >= 0,
           "optimizer weight_decay = {} is invalid; it must be finite and >= 0", *o.weight_decay);
  ST_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "optimizer nesterov = true needs momentum > 0 and dampening = 0 (got momentum {}, dampening {})",
           o.momentum, o.dampening);
}

void SGD::step(float* params, const float* grads, size_t n, double lr) {
  begin_step(params, grads, n, lr);
  const std::vector<GroupUpdate> updates = plan_updates(n);
  ++step_;
  for (const GroupUpdate& g : updates) {
    SgdUpdate u;
    u.params = params;
    u.grads = grads;
    u.momentum_buffer = opts_.momentum != 0 ? buffer(0) : nullptr;
    u.runs = &g.runs;
    u.lr = lr * g.lr_scale;
    u.momentum = opts_.momentum;
    u.dampening = opts_.dampening;
    u.weight_decay = g.weight_decay;
    u.nesterov = opts_.nesterov;
    // torch creates the momentum buffer as a copy of an element's first (decayed) gradient
    // rather than folding it into zeros, so its first update is plain SGD.
    u.first = g.steps == 0;
    backend().sgd(u);
  }
}

}  // namespace seqtrain
