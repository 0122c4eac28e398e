// Dropout forward/backward over the Backend's dropout op. See dropout.h.
#include "nn/dropout.h"
#include "core/trace.h"

#include <cmath>

namespace seqtrain {

Dropout::Dropout(float p_, Backend* backend) : p(p_), backend_(backend) {
  ST_CHECK(p >= 0.f && p <= 1.f && !std::isnan(p), "dropout probability must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x, Arena& arena, bool training, uint64_t seed) {
  ST_TRACE("dropout.forward", "layer", [&] { return trace::shape_args(x.shape); });
  shape = x.shape;
  active = training && p > 0.f;
  if (!active) return x;
  ST_CHECK(x.contiguous(), "Dropout: input {} must be contiguous", shape_str(x.shape));
  mask = DropoutMask{seed, p};
  Tensor y = arena.tensor(x.shape);
  backend().dropout_forward(x.f32(), y.f32(), x.numel(), p, seed);
  return y;
}

Tensor Dropout::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("dropout.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(dy.shape == shape, "Dropout: gradient {} does not match the forward input {}", shape_str(dy.shape),
           shape_str(shape));
  if (!active) return dy;
  ST_CHECK(dy.contiguous(), "Dropout: gradient {} must be contiguous", shape_str(dy.shape));
  Tensor dx = arena.tensor(dy.shape);
  backend().dropout_backward(dy.f32(), dx.f32(), dy.numel(), p, mask.seed);
  return dx;
}

}  // namespace seqtrain
