// Batch: one micro-batch as a model and the training step take it, a set of named tensors
// (Marian's data::Batch): inputs (float values, or int64 token ids), targets (float values, or
// int64 class labels / next tokens), and the optional lengths, key-padding mask and loss mask
// that variable-length sequences, padding and masked pretraining need (empty tensors when a
// source has none). It lives in core/ because every layer passes it: data/ fills it
// (data/batch_layout.h, data/loader.h), train/ steps on it, models/ read it.
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace seqtrain {

// Where a batch's rows sit in the global batch of a data-parallel step: rows [first, first +
// count) of `total`. Randomness keyed by a row (dropout masks) uses the global row, so a rank's
// shard draws the masks the one-process run draws for those samples. total 0: the batch is whole.
struct BatchRows {
  int64_t first = 0;
  int64_t total = 0;
};

struct Batch {
  int64_t epoch = 0;
  BatchRows rows;                   // this shard's place in the global batch (data-parallel runs)
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

// The tensors a step reads from a batch, the ones a device copies, in one order.
inline std::array<Tensor*, 5> batch_tensors(Batch& b) {
  return {&b.inputs, &b.targets, &b.lengths, &b.key_padding_mask, &b.loss_mask};
}

// A batch of inputs alone (evaluation, predict, tests): targets and masks empty.
inline Batch batch_of(const Tensor& inputs) {
  Batch b;
  b.inputs = inputs;
  b.count = inputs.shape.empty() ? 0 : inputs.shape[0];
  return b;
}

// A batch of targets alone, for an Objective called outside a step (tests, benchmarks).
inline Batch batch_of_targets(const Tensor& targets) {
  Batch b;
  b.targets = targets;
  b.count = targets.shape.empty() ? 0 : targets.shape[0];
  return b;
}

}  // namespace seqtrain
