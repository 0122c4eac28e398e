// The activations as plain loops (libm's tanh, exp and erf): what the reference backend runs
// for every kind, and the CPU backend for the kinds it has no vector kernel for.
#pragma once
#include <cstdint>

#include "backend/activation_kind.h"

namespace seqtrain {

// y[i] = f(x[i]) for i < n.
void activation_forward_loop(ActKind k, const float* x, float* y, int64_t n);
// dx[i] = dy[i] * f'(x[i]). ReLU, Tanh and Sigmoid read only y (f' from the output); GELU only x.
void activation_backward_loop(ActKind k, const float* x, const float* y, const float* dy, float* dx, int64_t n);

}  // namespace seqtrain
