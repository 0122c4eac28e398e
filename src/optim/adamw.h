// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter), computed exactly as
// torch.optim.AdamW (amsgrad=False, maximize=False) does for each element:
//   p  *= 1 - lr*wd                      (only where the decay mask allows)
//   m   = beta1*m + (1-beta1)*g
//   v   = beta2*v + (1-beta2)*g*g
//   p  -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
// with t the 1-based step. State buffers: "exp_avg" (m) and "exp_avg_sq" (v).
#pragma once
#include <vector>

#include "optim/optimizer.h"

namespace seqtrain {

class AdamW : public Optimizer {
 public:
  // Throws Error when a hyperparameter is outside the range torch accepts.
  explicit AdamW(OptimizerOptions opts, Backend& backend = default_backend());
  void step(float* params, const float* grads, size_t n, double lr) override;
  // The captured step's halves (optimizer.h): each update's step goes to steps_, one
  // AdamWDeviceStep per update, apply() forms its t and scalars there and the updates read them.
  // With a skip flag (set_skip_flag) step() is the two halves.
  bool device_scalars() const override { return true; }
  void prepare(float* params, const float* grads, size_t n, double lr) override;
  void apply() override;
  uint64_t plan() const override { return plan_; }

 private:
  // One backend update of a step: its arguments and the decay runs they point to.
  struct Pending {
    AdamWUpdate u;
    std::vector<DecayRun> runs;
  };
  // step()'s host half: checks, update counts, each group's update (u.runs still unset: the
  // vector moves).
  std::vector<Pending> plan_step(float* params, const float* grads, size_t n, double lr);
  std::vector<Pending> pending_;  // prepare()'s updates, for apply()
  DeviceBuffer steps_;            // their AdamWDeviceSteps, in the backend's memory
  uint64_t plan_ = 0;
};

}  // namespace seqtrain
