// Typed tensors of a batch: see batch.h.
#include "data/batch_layout.h"

#include <cmath>

#include "core/error.h"

namespace seqtrain {
namespace {

Shape batch_shape(int64_t count, const Shape& per_sample, int64_t size) {
  Shape s{count};
  if (per_sample.empty()) {
    if (size != 1) s.push_back(size);
  } else {
    s.insert(s.end(), per_sample.begin(), per_sample.end());
  }
  return s;
}

// Ids and labels arrive as floats; anything but a whole number >= 0 is bad data, not a cast.
Tensor as_ids(const float* v, const Shape& shape, std::vector<int64_t>& out, int64_t per_sample, const char* what,
              const std::span<const int64_t>& samples) {
  const int64_t n = numel_of(shape);
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float f = v[i];
    ST_CHECK(f >= 0 && std::floor(f) == f, "sample {}: {} value {} at position {} is not a whole number >= 0",
             samples.empty() ? i / per_sample : samples[static_cast<size_t>(i / per_sample)], what, f, i % per_sample);
    out[static_cast<size_t>(i)] = static_cast<int64_t>(f);
  }
  return Tensor(out.data(), shape, DType::i64);
}

}  // namespace

void make_batch_tensors(const SampleLayout& layout, int64_t x_size, int64_t y_size, Batch& b,
                        std::vector<int64_t>& xi, std::vector<int64_t>& yi) {
  const Shape xs = batch_shape(b.count, layout.x.empty() ? Shape{x_size} : layout.x, x_size);
  ST_CHECK(numel_of(xs) == b.count * x_size, "batch: sample layout {} does not hold {} input values", shape_str(xs),
           b.count * x_size);
  b.inputs = layout.x_ids ? as_ids(b.x, xs, xi, x_size, "the token id", b.samples)
                          : Tensor(const_cast<float*>(b.x), xs);
  b.targets = Tensor();
  if (!b.y || y_size == 0) return;
  const Shape ys = layout.y.empty() && !layout.y_ids ? Shape{b.count, y_size} : batch_shape(b.count, layout.y, y_size);
  ST_CHECK(numel_of(ys) == b.count * y_size, "batch: sample layout {} does not hold {} target values", shape_str(ys),
           b.count * y_size);
  b.targets = layout.y_ids ? as_ids(b.y, ys, yi, y_size, "the label", b.samples)
                           : Tensor(const_cast<float*>(b.y), ys);
}

}  // namespace seqtrain
