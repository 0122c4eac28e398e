// How a batch is built from a source's samples (core/batch.h): the one function every path that
// makes a batch calls (the Loader's workers, evaluation, eval/predict, the resume replay), so a
// field is added once. Sources fill floats (an npy file, a window of a series, a text's ids) and
// their lengths; fill_batch types them as SampleLayout says (so the step never converts anything
// and class labels do not travel as floats to the loss) and turns lengths into the key-padding
// mask, on whichever thread fills the batch. For masked pretraining it also draws the loss mask
// (data/masking.h) and makes the inputs the targets.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/batch.h"
#include "core/tensor.h"
#include "data/batch_source.h"
#include "data/masking.h"

namespace seqtrain {

// What one sample's x and y are. Shapes exclude the batch dimension; an empty y shape with
// y_ids is one label per sample.
struct SampleLayout {
  Shape x;                 // e.g. {T, F} values, or {T} token ids; empty: {x_size}
  bool x_ids = false;      // x holds token ids: handed over as int64
  Shape y;                 // e.g. {H * targets} values, {T} next tokens, {} one label
  bool y_ids = false;      // y holds class labels or next tokens: int64
  // Masked pretraining (x [T, F] values): the loss mask's options, seed and stream; the targets
  // are then x itself.
  std::optional<SampleMasking> mask;
};


// The host memory of one batch, reused from batch to batch. x and y are where the source writes
// ([rows, x_size], [rows, y_size]): the loader points them at its slots (pinned memory on a GPU);
// other callers call reserve(), which points them at the vectors here.
struct BatchBuffers {
  float* x = nullptr;
  float* y = nullptr;
  std::vector<float> x_store, y_store;
  std::vector<int64_t> x_ids, y_ids;  // int64 copies when the layout says ids
  std::vector<int64_t> lengths;       // [rows] of a variable-length source
  std::vector<uint8_t> padding;       // [rows, steps]: 1 where a step is padding
  std::vector<float> loss_mask;       // [rows, steps, features] when the layout masks
  void reserve(const BatchSource& source, int64_t rows);
};

// Fills `batch` with samples idx of `source` for `epoch` (idx must outlive the batch: it becomes
// batch.samples): x and y, the typed inputs and targets (layout), and, when the source has
// lengths, batch.lengths [count] and batch.key_padding_mask [count, steps]; when layout.mask is
// set, batch.loss_mask [count, T, F] (1 = masked and valid) and batch.targets = batch.inputs (the
// same tensor). Throws Error naming the sample when an id or label is not a whole number >= 0.
void fill_batch(const BatchSource& source, const SampleLayout& layout, std::span<const int64_t> idx, int64_t epoch,
                BatchBuffers& buffers, Batch& batch);

// The layout of samples of `steps` x `features` float values (or `steps` token ids) with y_size
// float targets, or labels (one per sample, or one per step with y_size > 1).
SampleLayout sample_layout(int64_t steps, int64_t features, bool token_ids, bool labels, int64_t y_size);
// A window's: x [steps, features], y its horizon's targets.
SampleLayout window_layout(const WindowDataset& split);

}  // namespace seqtrain
