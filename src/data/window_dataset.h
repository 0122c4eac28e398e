// WindowDataset: the (input window, target window) pairs of one split, cut on demand from a
// shared normalized table instead of materialised, so a stride-1 dataset costs no more memory
// than the series itself. Window k of a split starting at row b covers
//   inputs:  feature columns of rows [b + k*stride, b + k*stride + lookback)
//   targets: target columns of rows  [b + k*stride + lookback, ... + horizon)
// With known-future features (data.future_features) x continues past the window for the
// horizon's rows: those features' values there, every other feature 0 (the targets' futures
// never enter x), so x is [lookback + horizon, features] and steps() says which.
// A fleet's split is one row range per series (Dataset::series order, empty ranges included):
// windows are numbered through series 0's, then series 1's, ..., and none crosses a range's end,
// so no window mixes two series.
// Also epoch_order(), which fixes the batch order of an epoch from (seed, epoch) alone, so a
// resumed run replays exactly the batches an uninterrupted run would have seen.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "data/series.h"
#include "data/split.h"

namespace seqtrain {

class WindowDataset {
 public:
  WindowDataset() = default;
  // feature_cols / target_cols index columns of `table`; rows are the split's rows.
  // known_future: per feature, whether its values over the horizon are known (empty = none).
  WindowDataset(std::shared_ptr<const Series> table, RowRange rows, std::vector<int64_t> feature_cols,
                std::vector<int64_t> target_cols, int64_t lookback, int64_t horizon, int64_t stride,
                std::vector<uint8_t> known_future = {});
  // Several ranges (a fleet: one per series), windows cut within each.
  WindowDataset(std::shared_ptr<const Series> table, std::vector<RowRange> ranges, std::vector<int64_t> feature_cols,
                std::vector<int64_t> target_cols, int64_t lookback, int64_t horizon, int64_t stride,
                std::vector<uint8_t> known_future = {});

  // The same columns, lookback, horizon and known future over other rows (a backtest's origins:
  // one range of lookback + horizon rows per window).
  WindowDataset with_ranges(std::vector<RowRange> ranges, int64_t stride) const {
    return WindowDataset(table_, std::move(ranges), features_, targets_, lookback_, horizon_, stride, known_future_);
  }

  int64_t size() const { return size_; }  // number of windows
  bool empty() const { return size_ == 0; }
  // From the first range's first row to the last range's end (one series: its rows).
  RowRange rows() const { return {ranges_.front().begin, ranges_.back().end}; }
  const std::vector<RowRange>& ranges() const { return ranges_; }
  // The range (a fleet's series) window k is cut from, and the table row it starts at.
  int64_t series_of(int64_t k) const;
  int64_t window_start(int64_t k) const;
  // The windows of range r: [first, end) of the split's numbering.
  std::pair<int64_t, int64_t> windows_of(int64_t r) const {
    return {first_[r], r + 1 < static_cast<int64_t>(first_.size()) ? first_[r + 1] : size_};
  }
  int64_t lookback() const { return lookback_; }
  int64_t horizon() const { return horizon_; }
  int64_t stride() const { return stride_; }
  int64_t n_features() const { return static_cast<int64_t>(features_.size()); }
  int64_t n_targets() const { return static_cast<int64_t>(targets_.size()); }
  int64_t future_steps() const { return future_steps_; }  // horizon with known-future features, else 0
  int64_t steps() const { return lookback_ + future_steps_; }  // rows of x per window
  int64_t x_size() const { return steps() * n_features(); }   // floats per window of x
  int64_t y_size() const { return horizon_ * n_targets(); }    // floats per window of y

  // Writes the windows `indices` (each in [0, size())) as a batch:
  //   x: [B, steps(), n_features], y: [B, horizon * n_targets] time-major
  //   (y[b][h * n_targets + t] = target t at step h). Either pointer may be null to skip it.
  void fill_batch(std::span<const int64_t> indices, float* x, float* y) const;
  // Windows begin, begin + 1, ..., begin + count - 1.
  void fill_batch(int64_t begin, int64_t count, float* x, float* y) const;

 private:
  void fill_one(int64_t k, float* x, float* y) const;

  std::shared_ptr<const Series> table_;
  std::vector<RowRange> ranges_{RowRange{}};
  std::vector<int64_t> first_;  // per range, the index of its first window
  std::vector<int64_t> features_;
  std::vector<int64_t> targets_;
  std::vector<uint8_t> known_future_;
  int64_t lookback_ = 1, horizon_ = 1, stride_ = 1, future_steps_ = 0;
  int64_t size_ = 0;
};

// The order in which an epoch visits n windows: 0..n-1 without shuffle; with shuffle a
// Fisher-Yates permutation drawn from Rng(mix_seed(seed, epoch)), so it depends on
// (seed, epoch) only. Batches are consecutive chunks of this order; the last may be partial.
std::vector<int64_t> epoch_order(size_t n, bool shuffle, uint64_t seed, int64_t epoch);

// ceil(n / batch_size): batches in an epoch of n windows, the last partial one included.
inline int64_t batch_count(int64_t n, int64_t batch_size) { return (n + batch_size - 1) / batch_size; }

}  // namespace seqtrain
