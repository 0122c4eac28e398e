#include "optim/sgd.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace seqtrain {

SGD::SGD(OptimizerOptions opts) : Optimizer(std::move(opts)) {
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

std::vector<std::string> SGD::buffer_names() const {
  if (opts_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step(float* params, const float* grads, size_t n, double lr) {
  begin_step(params, grads, n, lr);
  // torch creates the momentum buffer as a copy of the first (decayed) gradient rather than
  // folding it into zeros, so the first step is plain SGD.
  const bool first = step_ == 0;
  ++step_;
  const float wd = static_cast<float>(*opts_.weight_decay);
  const float mom = static_cast<float>(opts_.momentum);
  const float one_minus_damp = static_cast<float>(1.0 - opts_.dampening);
  const float neg_lr = static_cast<float>(-lr);
  const bool use_momentum = opts_.momentum != 0;
  const bool nesterov = opts_.nesterov;
  float* buf = use_momentum ? buffer(0) : nullptr;
  // Run by run of the decay mask, the non-decaying runs with weight decay 0.
  for (const DecayRun& r : decay_runs(n)) {
    const float wd_r = r.decay ? wd : 0.f;
    const int64_t begin = static_cast<int64_t>(r.begin), end = static_cast<int64_t>(r.end);
#pragma omp parallel for simd if (r.end - r.begin >= kOptimParallelMin)
    for (int64_t i = begin; i < end; ++i) {
      const float p = params[i];
      float d = grads[i];
      if (wd_r != 0.f) d += wd_r * p;
      if (use_momentum) {
        const float b = first ? d : buf[i] * mom + one_minus_damp * d;
        buf[i] = b;
        d = nesterov ? d + mom * b : b;
      }
      params[i] = p + neg_lr * d;
    }
  }
}

}  // namespace seqtrain
