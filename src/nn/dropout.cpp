// Dropout forward/backward over the Backend's dropout op. See dropout.h.
#include "nn/dropout.h"
#include "core/trace.h"

#include <cmath>

namespace seqtrain {
namespace {
thread_local BatchRows t_rows;
thread_local int64_t t_local = 0;
}  // namespace

PassRows::PassRows(BatchRows rows, int64_t local_rows) : saved_(t_rows), saved_local_(t_local) {
  t_rows = rows;
  t_local = local_rows;
}

PassRows::~PassRows() {
  t_rows = saved_;
  t_local = saved_local_;
}

BatchRows PassRows::of(int64_t rows) {
  if (t_rows.total == 0 || rows != t_local) return {};
  return t_rows;
}

// A tensor [outer..., B, inner...] whose B rows are rows [first, first + B) of the global batch:
// each outer slice is one run of B * inner elements at global index (o * total + first) * inner.
void Dropout::map(const float* x, float* y) const {
  const int64_t n = numel_of(shape);
  if (rows.total == 0) {
    backend().dropout_at(x, y, n, p, mask.seed, 0);
    return;
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < batch_dim; ++d) outer *= shape[d];
  for (size_t d = batch_dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t run = shape[batch_dim] * inner;
  for (int64_t o = 0; o < outer; ++o)
    backend().dropout_at(x + o * run, y + o * run, run, p, mask.seed, (o * rows.total + rows.first) * inner);
}

Dropout::Dropout(float p_, Backend* backend) : p(p_), backend_(backend) {
  ST_CHECK(p >= 0.f && p <= 1.f && !std::isnan(p), "dropout probability must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed, int batch_dim_) {
  ST_TRACE("dropout.forward", "layer", [&] { return trace::shape_args(x.shape); });
  shape = x.shape;
  active = training && p > 0.f;
  if (!active) return x;
  ST_CHECK(x.contiguous(), "Dropout: input {} must be contiguous", shape_str(x.shape));
  mask = DropoutMask{seed, p};
  batch_dim = batch_dim_;
  rows = static_cast<int64_t>(shape.size()) > batch_dim ? PassRows::of(shape[batch_dim]) : BatchRows{};
  Tensor y = arena.tensor(x.shape);
  if (rows.total == 0) backend().dropout_forward(x.f32(), y.f32(), x.numel(), p, seed);
  else map(x.f32(), y.f32());
  return y;
}

Tensor Dropout::backward(const Tensor& dy, Arena& arena) {
  ST_TRACE("dropout.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(dy.shape == shape, "Dropout: gradient {} does not match the forward input {}", shape_str(dy.shape),
           shape_str(shape));
  if (!active) return dy;
  ST_CHECK(dy.contiguous(), "Dropout: gradient {} must be contiguous", shape_str(dy.shape));
  Tensor dx = arena.tensor(dy.shape);
  if (rows.total == 0) backend().dropout_backward(dy.f32(), dx.f32(), dy.numel(), p, mask.seed);
  else map(dy.f32(), dx.f32());
  return dx;
}

}  // namespace seqtrain
