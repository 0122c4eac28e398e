// Gradient clipping and scaling over the flat gradient buffer.
//
// clip_grad_norm() follows torch.nn.utils.clip_grad_norm_ (norm_type 2): the total norm is the
// L2 norm of all gradients together, clip_coef = max_norm / (total_norm + 1e-6), and the
// gradients are multiplied by clip_coef only when it is below 1. The norm is accumulated in
// double so a buffer of millions of elements loses no accuracy (torch sums in float32; the two
// agree to float precision).
//
// Gradient accumulation: seqtrain divides each micro-batch's loss gradient by the number of
// micro-batches k (the loss layer is given 1/k as its scale) so the summed gradients are the
// mean over the whole batch, as in the usual PyTorch recipe `(loss / k).backward()`. When the
// gradients were accumulated unscaled instead, scale_grads(g, n, 1.0f / k) does the same
// before clipping and the optimizer step.
#pragma once
#include <cstddef>

namespace seqtrain {

class Backend;

// The same on a given device's gradient buffer (the training step passes the model's
// ParamStore::backend()); the overloads without one below run on the CPU backend.
double grad_norm(Backend& backend, const float* g, size_t n);
double clip_grad_norm(Backend& backend, float* g, size_t n, double max_norm);
void scale_grads(Backend& backend, float* g, size_t n, float s);

// L2 norm of g[0, n), accumulated in double. Inf or NaN when any element is non-finite.
double grad_norm(const float* g, size_t n);

// Clips g[0, n) in place to a total L2 norm of at most max_norm and returns the norm measured
// before clipping. When that norm is Inf or NaN the gradients are left unchanged and the
// non-finite norm is returned: the caller decides (skip the step, lower the loss scale, stop).
// (torch would multiply every gradient by NaN here; leaving them alone loses nothing.)
// Throws Error unless max_norm is finite and > 0.
double clip_grad_norm(float* g, size_t n, double max_norm);

// g[i] *= s for every element (gradient accumulation, loss-scale removal).
void scale_grads(float* g, size_t n, float s);

}  // namespace seqtrain
