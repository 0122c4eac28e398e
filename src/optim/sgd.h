// SGD: stochastic gradient descent with optional momentum, dampening, Nesterov momentum and
// L2 weight decay, computed exactly as torch.optim.SGD (maximize=False) does:
//   d = g + wd*p                         (wd term only where the decay mask allows)
//   b = d on the first step, else momentum*b + (1-dampening)*d
//   d = nesterov ? d + momentum*b : b    (only when momentum != 0)
//   p -= lr*d
// State buffer: "momentum_buffer" when momentum != 0, none otherwise.
#pragma once
#include "optim/optimizer.h"

namespace seqtrain {

class SGD : public Optimizer {
 public:
  // Throws Error when a hyperparameter is out of range or nesterov is set without
  // momentum > 0 and dampening == 0 (torch refuses that combination too).
  explicit SGD(OptimizerOptions opts, Backend& backend = default_backend());
  void step(float* params, const float* grads, size_t n, double lr) override;
};

}  // namespace seqtrain
