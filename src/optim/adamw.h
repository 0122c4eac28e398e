// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), computed exactly as
// torch.optim.AdamW (amsgrad=False, maximize=False) does for each element:
//   p  *= 1 - lr*wd                      (only where the decay mask allows)
//   m   = beta1*m + (1-beta1)*g
//   v   = beta2*v + (1-beta2)*g*g
//   p  -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
// with t the 1-based step. State buffers: "exp_avg" (m) and "exp_avg_sq" (v).
#pragma once
#include "optim/optimizer.h"

namespace seqtrain {

class AdamW : public Optimizer {
 public:
  // Throws Error when a hyperparameter is outside the range torch accepts.
  explicit AdamW(OptimizerOptions opts, Backend& backend = default_backend());
  void step(float* params, const float* grads, size_t n, double lr) override;
};

}  // namespace seqtrain
