// SequencePool: one vector per sample from a sequence of them, over the sample's valid steps only
// (padding never reaches the result, and so never its gradient): how an encoder turns its
// per-step outputs into what its head reads. x [B, T, C] -> y [B, C]:
//   last   x[b, n_b - 1]                    the last valid step (a causal or recurrent summary)
//   first  x[b, 0]                          a prepended token's output (BERT / ViT's [CLS])
//   mean   sum over t < n_b of x[b, t] / n_b
//   max    elementwise max over t < n_b; its gradient goes to the step that won (the first on ties)
// n_b is sample b's valid steps, 1..T, as the host holds them (models/step_context.h's
// host_lengths()); padding is always at the end. last, first and mean are copies and one small
// GEMM per sample on the backend; max is the backend's masked_max op, which reads the same valid
// steps as a [B, T] padding mask in the backend's memory.
// Packed (nn/token_packing.h), x is the valid steps only, [1, Nv, C], sample b's rows contiguous
// from packing.start(b): the same results from those rows (max per sample over its rows, no mask),
// and backward returns dx [1, Nv, C].
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "nn/token_packing.h"

namespace seqtrain {

enum class PoolKind { last, first, mean, max };
// model.pooling's words: last, mean, max, cls (the first step, where the encoder puts its token).
PoolKind pool_kind(const std::string& word);

// `valid` steps per sample as a [B, T] u8 padding mask (1 from each sample's length on) in the
// arena, in the backend's memory: what the max pooling and the attention op read. Null when
// `valid` is empty.
const uint8_t* padding_mask(std::span<const int64_t> valid, int64_t T, Arena& arena, Backend& backend);
// A batch's step lengths ([B], each 1..T; empty: none given) as rows of `per_row` steps each (a
// row is padding only when all its steps are) behind `lead` rows that are always valid (a cls
// token): each sample's valid rows into `valid` and their padding_mask. When no row of any sample
// is padding, `valid` is left empty and the mask is null. `model` names the family in the errors.
const uint8_t* row_padding(std::span<const int64_t> lengths, int64_t B, int64_t T, int64_t per_row, int64_t lead,
                           std::string_view model, std::vector<int64_t>& valid, Arena& arena, Backend& backend);

class SequencePool {
 public:
  SequencePool(Backend& backend, PoolKind kind) : backend_(backend), kind_(kind) {}
  // valid: [B] steps per sample on the host, each in 1..T, or empty for all T; mask: null when
  // valid is empty, else those steps as a [B, T] u8 padding mask in the backend's memory (read by
  // max only), alive until backward.
  Tensor forward(const Tensor& x, std::span<const int64_t> valid, const uint8_t* mask, Arena& arena);
  // x [1, Nv, C], packing's valid rows -> y [B, C].
  Tensor forward(const Tensor& x, const TokenPacking& packing, Arena& arena);
  // dy [B, C] -> dx (x's shape), zero at every step the forward did not read.
  Tensor backward(const Tensor& dy, Arena& arena);

  PoolKind kind() const { return kind_; }

 private:
  int64_t steps(int64_t b) const { return valid_.empty() ? T_ : valid_[static_cast<size_t>(b)]; }
  // x's row of sample b's step 0.
  int64_t first_row(int64_t b) const { return packed_ ? start_[static_cast<size_t>(b)] : b * T_; }
  Tensor pool_rows(const Tensor& x, Arena& arena);  // last, first and mean, from first_row(b) on
  Backend& backend_;
  PoolKind kind_;
  std::vector<int64_t> valid_;  // the last forward's
  std::vector<int64_t> start_;  // packed: each sample's first row
  bool packed_ = false;
  Shape in_shape_;              // x's
  int64_t B_ = 0, T_ = 0, C_ = 0;
  Tensor ones_;  // mean: T ones, the per-sample GEMM's row
  Tensor arg_;   // max: [B, C] i32, the winning step
};

}  // namespace seqtrain
