// Embedding forward/backward over the Backend's embedding op. See embedding.h.
#include "nn/embedding.h"
#include "core/trace.h"

#include <cstring>

#include "backend/backend.h"

namespace seqtrain {

Embedding::Embedding(ParamStore& p, const std::string& prefix, int64_t num_, int64_t dim_)
    : params(p), num(num_), dim(dim_) {
  ST_CHECK(num > 0 && dim > 0, "Embedding '{}': num_embeddings={} and embedding_dim={} must both be positive",
           prefix, num, dim);
  weight = params.add(prefix + ".weight", {num, dim});
  params.mark_embedding(weight);
}

void Embedding::init(Rng& rng) {
  float* w = params.param(weight).f32();
  for (int64_t i = 0; i < num * dim; ++i) w[i] = rng.normal();
}

EmbeddingArgs Embedding::lookup(const Tensor& ids) const {
  ST_CHECK(ids.dtype == DType::i64 && ids.contiguous(), "Embedding: ids must be a contiguous int64 tensor, got {} {}",
           dtype_name(ids.dtype), shape_str(ids.shape));
  return EmbeddingArgs{.rows = num, .dim = dim, .count = ids.numel(), .ids = ids.data<int64_t>(),
                       .ids_checked = ids_checked};
}

Tensor Embedding::forward(const Tensor& ids, Arena& arena, bool checked) {
  ST_TRACE("embedding.forward", "layer", [&] { return trace::shape_args(ids.shape); });
  Shape ys = ids.shape;
  ys.push_back(dim);
  Tensor y = arena.tensor(ys);
  gather(ids, y, arena, /*accumulate=*/false, checked);
  return y;
}

void Embedding::forward_add(const Tensor& ids, const Tensor& y, Arena& arena, bool checked) {
  Shape want = ids.shape;
  want.push_back(dim);
  ST_CHECK(y.shape == want && y.contiguous(), "Embedding: output {} does not match the ids' {}", shape_str(y.shape),
           shape_str(want));
  gather(ids, y, arena, /*accumulate=*/true, checked);
}

void Embedding::gather(const Tensor& ids, const Tensor& y, Arena& arena, bool accumulate, bool checked) {
  ids_checked = checked;
  // The op checks every id before it writes anything: a bad batch leaves no half-written output.
  params.backend().embedding_forward(lookup(ids), params.param(weight).f32(), y.f32(), accumulate);
  // Copy the ids: they are tiny, and the caller may refill its batch buffer before backward.
  ids_saved = arena.tensor(ids.shape, DType::i64);
  // The float copy moves the int64 ids' bytes unchanged (two floats each, never arithmetic).
  if (ids.numel())
    params.backend().copy(static_cast<const float*>(ids.ptr), static_cast<float*>(ids_saved.ptr),
                          static_cast<size_t>(ids.numel()) * 2);
}

void Embedding::backward(const Tensor& dy, Arena&) {
  ST_TRACE("embedding.backward", "layer", [&] { return trace::shape_args(dy.shape); });
  ST_CHECK(ids_saved.ptr != nullptr, "Embedding: backward called before forward");
  Shape want = ids_saved.shape;
  want.push_back(dim);
  ST_CHECK(dy.shape == want && dy.contiguous(), "Embedding: gradient {} does not match the output shape {}",
           shape_str(dy.shape), shape_str(want));
  params.backend().embedding_backward(lookup(ids_saved), dy.f32(), params.grad(weight).f32());
}

}  // namespace seqtrain
