#include "optim/adamw.h"

#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_kernels.h"
#include "core/error.h"

namespace seqtrain {

AdamW::AdamW(OptimizerOptions opts) : Optimizer(std::move(opts)) {
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
  ++step_;
  // Scalars are formed in double and rounded to float once, as torch does when a Python float
  // meets a float32 tensor; the per-element arithmetic follows torch's operation order so the
  // two agree to the last bit or close to it.
  const double t = static_cast<double>(step_);
  const double bias_c1 = 1.0 - std::pow(opts_.beta1, t);
  const double bias_c2 = 1.0 - std::pow(opts_.beta2, t);
  AdamWKernelArgs k;
  const float decay = static_cast<float>(1.0 - lr * *opts_.weight_decay);
  k.b1 = static_cast<float>(opts_.beta1);
  k.one_minus_b1 = static_cast<float>(1.0 - opts_.beta1);
  k.b2 = static_cast<float>(opts_.beta2);
  k.one_minus_b2 = static_cast<float>(1.0 - opts_.beta2);
  k.bc2_sqrt = static_cast<float>(std::sqrt(bias_c2));
  k.eps = static_cast<float>(opts_.eps);
  k.neg_step_size = static_cast<float>(-(lr / bias_c1));
  // One kernel call per run of the decay mask: the non-decaying runs multiply by 1 (what
  // torch's weight_decay-0 group does), and the fused kernel keeps no per-element branch.
  for (const DecayRun& r : decay_runs(n)) {
    k.params = params + r.begin;
    k.grads = grads + r.begin;
    k.m = buffer(0) + r.begin;
    k.v = buffer(1) + r.begin;
    k.n = static_cast<int64_t>(r.end - r.begin);
    k.decay = r.decay ? decay : 1.f;
    k.parallel = r.end - r.begin >= kOptimParallelMin;
    cpu_kernels().adamw(k);
  }
}

}  // namespace seqtrain
