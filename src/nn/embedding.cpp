// Embedding forward/backward. See embedding.h.
#include "nn/embedding.h"

#include <cstring>

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

Tensor Embedding::forward(const Tensor& ids, Arena& arena) {
  ST_CHECK(ids.dtype == DType::i64 && ids.contiguous(), "Embedding: ids must be a contiguous int64 tensor, got {} {}",
           dtype_name(ids.dtype), shape_str(ids.shape));
  const int64_t n = ids.numel();
  const int64_t* id = ids.data<int64_t>();
  // Validate everything first so a bad batch leaves no half-written output behind.
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(id[i] >= 0 && id[i] < num, "Embedding: id {} at position {} is out of range for a vocabulary of {} (valid ids are 0..{})",
             id[i], i, num, num - 1);
  // Copy the ids: they are tiny, and the caller may refill its batch buffer before backward.
  ids_saved = arena.tensor(ids.shape, DType::i64);
  std::memcpy(ids_saved.ptr, id, n * sizeof(int64_t));
  Shape ys = ids.shape;
  ys.push_back(dim);
  Tensor y = arena.tensor(ys);
  const float* w = params.param(weight).f32();
  float* yp = y.f32();
  for (int64_t i = 0; i < n; ++i) std::memcpy(yp + i * dim, w + id[i] * dim, dim * sizeof(float));
  return y;
}

void Embedding::backward(const Tensor& dy, Arena& arena) {
  ST_CHECK(ids_saved.ptr != nullptr, "Embedding: backward called before forward");
  Shape want = ids_saved.shape;
  want.push_back(dim);
  ST_CHECK(dy.shape == want && dy.contiguous(), "Embedding: gradient {} does not match the output shape {}",
           shape_str(dy.shape), shape_str(want));
  const int64_t n = ids_saved.numel();
  const int64_t* id = ids_saved.data<int64_t>();
  const float* g = dy.f32();
  float* dw = params.grad(weight).f32();
  // Serial on purpose: repeated ids hit the same row, and a fixed order keeps sums reproducible.
  for (int64_t i = 0; i < n; ++i) {
    float* row = dw + id[i] * dim;
    const float* gi = g + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += gi[j];
  }
}

}  // namespace seqtrain
