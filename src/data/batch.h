// Batch: one micro-batch as the training step takes it, a set of named tensors (Marian's
// data::Batch): inputs (float values, or int64 token ids), targets (float values, or int64
// class labels / next tokens), and the optional lengths, key-padding mask and loss mask that
// variable-length sequences, padding and masked pretraining need (empty tensors when a source
// has none). Sources fill floats (an npy file, a window of a series, a text's ids); the loader
// turns them into these typed tensors on its worker threads, as SampleLayout says, so the step
// never converts anything and class labels no longer travel as floats to the loss.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace seqtrain {

// What one sample's x and y are. Shapes exclude the batch dimension; an empty y shape with
// y_ids is one label per sample.
struct SampleLayout {
  Shape x;                 // e.g. {T, F} values, or {T} token ids; empty: {x_size}
  bool x_ids = false;      // x holds token ids: handed over as int64
  Shape y;                 // e.g. {H * targets} values, {T} next tokens, {} one label
  bool y_ids = false;      // y holds class labels or next tokens: int64
};

struct Batch {
  int64_t epoch = 0;
  int64_t index = 0;                // position of the batch in its epoch
  int64_t count = 0;                // samples in this batch (the last may be partial)
  std::span<const int64_t> samples; // source indices of the rows, in row order
  const float* x = nullptr;         // the source's floats: [count, x_size]
  const float* y = nullptr;         // [count, y_size]; null when the source has no targets

  Tensor inputs;            // [count, ...layout.x], f32 or i64
  Tensor targets;           // [count, ...layout.y], f32 or i64; empty when the source has no y
  Tensor lengths;           // optional [count] i64: valid steps per sample
  Tensor key_padding_mask;  // optional [count, T] u8: 1 where a step is padding
  Tensor loss_mask;         // optional, shaped like targets, f32: 1 where a target counts
};

// Sets batch.inputs / batch.targets over x and y (count samples) as `layout` says, converting
// ids into xi / yi (resized here). Throws Error naming the sample when an id or label is not
// a whole number >= 0.
void make_batch_tensors(const SampleLayout& layout, int64_t x_size, int64_t y_size, Batch& batch,
                        std::vector<int64_t>& xi, std::vector<int64_t>& yi);

}  // namespace seqtrain
