// TokenPacking's gather and scatter. See token_packing.h.
#include "nn/token_packing.h"

namespace seqtrain {

TokenPacking::TokenPacking(std::span<const int64_t> valid, int64_t N) : valid_(valid.begin(), valid.end()), seq_(N) {
  for (const int64_t n : valid_) {
    ST_CHECK(n >= 1 && n <= N, "TokenPacking: a sample has {} valid tokens; each needs 1 to {}", n, N);
    start_.push_back(rows_);
    rows_ += n;
  }
}

Tensor TokenPacking::gather(Backend& backend, const Tensor& x, Arena& arena) const {
  ST_CHECK(x.shape.size() == 3 && x.dim(0) == batch() && x.dim(1) == seq_ && x.contiguous(),
           "TokenPacking: gather from {}, expected a contiguous [{}, {}, W]", shape_str(x.shape), batch(), seq_);
  const int64_t W = x.dim(2);
  Tensor out = arena.tensor({1, rows_, W});
  for (int64_t b = 0; b < batch(); ++b)
    backend.copy(x.f32() + b * seq_ * W, out.f32() + start(b) * W, static_cast<size_t>(tokens(b) * W));
  return out;
}

Tensor TokenPacking::scatter(Backend& backend, const Tensor& xp, Arena& arena) const {
  ST_CHECK(xp.shape.size() == 3 && xp.dim(0) == 1 && xp.dim(1) == rows_ && xp.contiguous(),
           "TokenPacking: scatter from {}, expected a contiguous [1, {}, W]", shape_str(xp.shape), rows_);
  const int64_t W = xp.dim(2);
  Tensor out = arena.tensor({batch(), seq_, W});
  for (int64_t b = 0; b < batch(); ++b) {
    float* row = out.f32() + b * seq_ * W;
    backend.copy(xp.f32() + start(b) * W, row, static_cast<size_t>(tokens(b) * W));
    if (tokens(b) < seq_) backend.fill(row + tokens(b) * W, static_cast<size_t>((seq_ - tokens(b)) * W), 0.f);
  }
  return out;
}

}  // namespace seqtrain
