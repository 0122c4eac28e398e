// torch.nn.utils.clip_grad_norm_'s rule, in one place for the two paths that apply it: optim/
// clip.h's clip_grad_norm (the norm back on the host) and Backend::clip_grad_norm_into's
// host-accessible default (the training step's). The CUDA kernel applies the same expression on
// the device (cuda_step_kernels.cu).
#pragma once
#include <cmath>

namespace seqtrain {

// The factor the gradients are multiplied by for a pre-clip norm `total`: max_norm / (total +
// 1e-6) when that is below 1; 1 (leave them) when it is not, when the norm is not finite (the
// caller decides: skip, lower the loss scale), or when max_norm <= 0 (clipping off).
inline double clip_coefficient(double total, double max_norm) {
  if (max_norm <= 0 || !std::isfinite(total)) return 1.0;
  const double coef = max_norm / (total + 1e-6);
  return coef < 1.0 ? coef : 1.0;
}

}  // namespace seqtrain
