// Typed tensors of a batch: see batch.h.
#include "data/batch_layout.h"

#include <algorithm>
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

// lengths [count] and the key-padding mask [count, steps] (1 from each sample's length on).
void make_length_tensors(const BatchSource& source, int64_t steps, Batch& b, BatchBuffers& buf) {
  b.lengths = Tensor();
  b.key_padding_mask = Tensor();
  if (!source.has_lengths()) return;
  const auto n = static_cast<size_t>(b.count);
  buf.lengths.resize(n);
  source.fill_lengths(b.samples, buf.lengths.data());
  buf.padding.assign(n * static_cast<size_t>(steps), 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t len = buf.lengths[i];
    ST_CHECK(1 <= len && len <= steps, "sample {}: length {} is outside 1..{} steps", b.samples[i], len, steps);
    std::fill(buf.padding.begin() + static_cast<std::ptrdiff_t>(i * steps + len),
              buf.padding.begin() + static_cast<std::ptrdiff_t>((i + 1) * steps), uint8_t{1});
  }
  b.lengths = Tensor(buf.lengths.data(), {b.count}, DType::i64);
  b.key_padding_mask = Tensor(buf.padding.data(), {b.count, steps}, DType::u8);
}

// Masked pretraining: the loss mask over the valid steps, and x as its own target.
void make_loss_mask(const SampleLayout& layout, Batch& b, BatchBuffers& buf) {
  b.loss_mask = Tensor();
  if (!layout.mask) return;
  ST_CHECK(!layout.x_ids && layout.x.size() == 2, "batch: masked pretraining needs inputs of [T, F] values, got {}{}",
           shape_str(layout.x), layout.x_ids ? " token ids" : "");
  const int64_t T = layout.x[0], F = layout.x[1];
  buf.loss_mask.resize(static_cast<size_t>(b.count * T * F));
  fill_masks(*layout.mask, b.samples, b.epoch, T, F, b.lengths.ptr == nullptr ? nullptr : buf.lengths.data(),
             buf.loss_mask.data());
  b.loss_mask = Tensor(buf.loss_mask.data(), {b.count, T, F});
  b.targets = b.inputs;
}

}  // namespace

void BatchBuffers::reserve(const BatchSource& source, int64_t rows) {
  x_store.resize(static_cast<size_t>(rows * source.x_size()));
  y_store.resize(static_cast<size_t>(rows * source.y_size()));
  x = x_store.data();
  y = y_store.data();
}

void fill_batch(const BatchSource& source, const SampleLayout& layout, std::span<const int64_t> idx, int64_t epoch,
                BatchBuffers& buf, Batch& b) {
  b.epoch = epoch;
  b.count = static_cast<int64_t>(idx.size());
  b.samples = idx;
  b.x = buf.x;
  b.y = source.y_size() > 0 ? buf.y : nullptr;
  source.fill(idx, epoch, buf.x, const_cast<float*>(b.y));
  make_batch_tensors(layout, source.x_size(), source.y_size(), b, buf.x_ids, buf.y_ids);
  make_length_tensors(source, layout.x.empty() ? source.x_size() : layout.x[0], b, buf);
  make_loss_mask(layout, b, buf);
}

SampleLayout sample_layout(int64_t steps, int64_t features, bool token_ids, bool labels, int64_t y_size) {
  SampleLayout l;
  l.x_ids = token_ids;
  l.x = token_ids ? Shape{steps} : Shape{steps, features};
  l.y_ids = labels;
  l.y = labels && y_size == 1 ? Shape{} : Shape{y_size};
  return l;
}

SampleLayout window_layout(const WindowDataset& split) {
  return sample_layout(split.steps(), split.n_features(), false, false, split.y_size());
}

}  // namespace seqtrain
