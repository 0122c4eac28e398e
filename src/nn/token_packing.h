// TokenPacking: the valid rows of a padded batch, packed. A padded layout x [B, N, W] holds sample
// b's valid tokens in its rows 0..n_b - 1 (padding always at the end); the packed layout
// xp [1, Nv, W], Nv = sum n_b, holds them sample after sample, so sample b's rows are contiguous
// from start(b) = n_0 + ... + n_{b-1}. Per-token layers (Linear, LayerNorm, GELU, dropout,
// residual adds) run on the packed rows, so padded tokens cost nothing; the layers that mix tokens
// (the attention op) scatter into the padded layout and gather back. Gather and scatter are one
// backend copy per sample (so they run on whatever memory the backend owns), and each is the
// other's backward: gather's gradient is a scatter into zeros, scatter's a gather.
// The packed tensor keeps three dimensions, [1, Nv, W], so every [B, T, C] layer takes it as is.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"

namespace seqtrain {

class TokenPacking {
 public:
  TokenPacking() = default;
  // valid: [B] tokens per sample, each in 1..N.
  TokenPacking(std::span<const int64_t> valid, int64_t N);

  int64_t batch() const { return static_cast<int64_t>(valid_.size()); }
  int64_t seq() const { return seq_; }
  int64_t rows() const { return rows_; }  // Nv
  std::span<const int64_t> valid() const { return valid_; }
  int64_t start(int64_t b) const { return start_[static_cast<size_t>(b)]; }
  int64_t tokens(int64_t b) const { return valid_[static_cast<size_t>(b)]; }

  // x [B, N, W] -> [1, Nv, W]: the valid rows.
  Tensor gather(Backend& backend, const Tensor& x, Arena& arena) const;
  // xp [1, Nv, W] -> [B, N, W]: the valid rows in place, zeros at padding (finite values a padded
  // row's consumer may read: the attention op computes padded queries, whose zero gradient then
  // multiplies them).
  Tensor scatter(Backend& backend, const Tensor& xp, Arena& arena) const;

 private:
  std::vector<int64_t> valid_, start_;
  int64_t seq_ = 0, rows_ = 0;
};

}  // namespace seqtrain
