// How the loader turns a source's floats into a Batch's typed tensors (core/batch.h). Sources
// fill floats (an npy file, a window of a series, a text's ids); the loader turns them into the
// typed tensors on its worker threads, as SampleLayout says, so the step never converts
// anything and class labels no longer travel as floats to the loss.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/batch.h"
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


// Sets batch.inputs / batch.targets over x and y (count samples) as `layout` says, converting
// ids into xi / yi (resized here). Throws Error naming the sample when an id or label is not
// a whole number >= 0.
void make_batch_tensors(const SampleLayout& layout, int64_t x_size, int64_t y_size, Batch& batch,
                        std::vector<int64_t>& xi, std::vector<int64_t>& yi);

}  // namespace seqtrain
