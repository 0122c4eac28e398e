// RnnPooling: model.pooling for the RNN forecaster / classifier: how the top layer's output
// [T, N, F] (time major, F = hidden * directions) becomes one vector [N, F] per sample, and the
// way back. Each sample counts only its valid steps (a Batch's lengths; all T without them):
//   last  its output at its last valid step (both directions there: the forward direction's
//         final state, the reverse direction's state after the whole sample), as T-1 without
//         lengths, bit for bit the forecaster's slice of old
//   mean  the mean over its valid steps
//   max   the elementwise max over its valid steps (the gradient goes to the step it came from)
// `last` moves rows with the Backend's copy; mean and max are host loops over a host view of
// the output (the Backend has no pooling op: a device backend pays one download and upload).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace seqtrain {

class RnnPooling {
 public:
  // mode: last | mean | max (model.pooling); anything else is an Error.
  RnnPooling(const std::string& mode, Backend& backend);
  // top [T, N, F]; lengths empty or [N] in [1, T] (RnnStack::forward's). Returns [N, F].
  Tensor forward(const Tensor& top, std::span<const int64_t> lengths, Arena& arena);
  // dpooled [N, F] of the last forward -> dtop [T, N, F], zero where no step was read.
  Tensor backward(const Tensor& dpooled, Arena& arena);

 private:
  enum class Mode { last, mean, max };
  int64_t steps(int64_t n) const { return lengths_.empty() ? shape_[0] : lengths_[n]; }
  // Runs fill(p) on n floats of `dst` (the backend's memory) from host code: p is dst itself
  // where the backend is host-accessible, else a staging copy uploaded after.
  template <class Fill>
  void write_host(float* dst, size_t n, Fill&& fill);

  Mode mode_;
  Backend& backend_;
  Shape shape_;                   // [T, N, F] of the last forward
  std::vector<int64_t> lengths_;  // of the last forward (empty: all T)
  std::vector<int32_t> argmax_;   // max: [N, F], the step each pooled value came from
  std::vector<float> stage_;
};

}  // namespace seqtrain
