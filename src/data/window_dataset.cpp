#include "data/window_dataset.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/rng.h"

namespace seqtrain {

WindowDataset::WindowDataset(std::shared_ptr<const Series> table, RowRange rows, std::vector<int64_t> feature_cols,
                             std::vector<int64_t> target_cols, int64_t lookback, int64_t horizon, int64_t stride,
                             std::vector<uint8_t> known_future)
    : WindowDataset(std::move(table), std::vector<RowRange>{rows}, std::move(feature_cols), std::move(target_cols),
                    lookback, horizon, stride, std::move(known_future)) {}

WindowDataset::WindowDataset(std::shared_ptr<const Series> table, std::vector<RowRange> ranges,
                             std::vector<int64_t> feature_cols, std::vector<int64_t> target_cols, int64_t lookback,
                             int64_t horizon, int64_t stride, std::vector<uint8_t> known_future)
    : table_(std::move(table)),
      ranges_(std::move(ranges)),
      features_(std::move(feature_cols)),
      targets_(std::move(target_cols)),
      known_future_(std::move(known_future)),
      lookback_(lookback),
      horizon_(horizon),
      stride_(stride) {
  ST_CHECK(table_ != nullptr, "WindowDataset: no table");
  ST_CHECK(!ranges_.empty(), "WindowDataset: no row range");
  for (const RowRange& r : ranges_) {
    ST_CHECK(0 <= r.begin && r.begin <= r.end && r.end <= table_->rows,
             "WindowDataset: rows [{}, {}) outside the table's {} rows", r.begin, r.end, table_->rows);
    first_.push_back(size_);
    size_ += window_count(r.size(), lookback, horizon, stride);
  }
  for (int64_t c : features_) ST_CHECK(0 <= c && c < table_->cols(), "WindowDataset: feature column {}", c);
  for (int64_t c : targets_) ST_CHECK(0 <= c && c < table_->cols(), "WindowDataset: target column {}", c);
  ST_CHECK(known_future_.empty() || known_future_.size() == features_.size(),
           "WindowDataset: {} known-future flags for {} features", known_future_.size(), features_.size());
  for (uint8_t k : known_future_)
    if (k) future_steps_ = horizon_;
}

int64_t WindowDataset::series_of(int64_t k) const {
  ST_CHECK(0 <= k && k < size_, "window index {} out of range: this split has {} windows", k, size_);
  if (ranges_.size() == 1) return 0;
  // The last range whose first window is at or before k (empty ranges share their successor's).
  return std::upper_bound(first_.begin(), first_.end(), k) - first_.begin() - 1;
}

int64_t WindowDataset::window_start(int64_t k) const {
  const int64_t r = series_of(k);
  return ranges_[r].begin + (k - first_[r]) * stride_;
}

void WindowDataset::fill_one(int64_t k, float* x, float* y) const {
  const int64_t cols = table_->cols();
  const int64_t start = window_start(k);
  const float* base = table_->values.data();
  if (x) {
    for (int64_t t = 0; t < lookback_; ++t) {
      const float* row = base + (start + t) * cols;
      for (size_t f = 0; f < features_.size(); ++f) *x++ = row[features_[f]];
    }
    for (int64_t h = 0; h < future_steps_; ++h) {  // the horizon's rows: known-future features only
      const float* row = base + (start + lookback_ + h) * cols;
      for (size_t f = 0; f < features_.size(); ++f) *x++ = known_future_[f] ? row[features_[f]] : 0.f;
    }
  }
  if (y) {
    for (int64_t h = 0; h < horizon_; ++h) {
      const float* row = base + (start + lookback_ + h) * cols;
      for (size_t t = 0; t < targets_.size(); ++t) *y++ = row[targets_[t]];
    }
  }
}

void WindowDataset::fill_batch(std::span<const int64_t> indices, float* x, float* y) const {
  // A shuffled batch reads windows scattered over the table: a fleet's is hundreds of MB, so each
  // window's rows are cache misses. Asking for the rows a few windows ahead overlaps those misses
  // (a third off the fill of a 10M-row fleet's batches, docs/BENCHMARKS.md).
  constexpr size_t kAhead = 4;
  const int64_t bytes = (lookback_ + horizon_) * table_->cols() * static_cast<int64_t>(sizeof(float));
  for (size_t b = 0; b < indices.size(); ++b) {
    if (b + kAhead < indices.size()) {
      const char* p = reinterpret_cast<const char*>(table_->values.data() + window_start(indices[b + kAhead]) *
                                                                              table_->cols());
      for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
    }
    fill_one(indices[b], x ? x + b * x_size() : nullptr, y ? y + b * y_size() : nullptr);
  }
}

void WindowDataset::fill_batch(int64_t begin, int64_t count, float* x, float* y) const {
  ST_CHECK(count >= 0, "fill_batch: negative count {}", count);
  for (int64_t b = 0; b < count; ++b)
    fill_one(begin + b, x ? x + b * x_size() : nullptr, y ? y + b * y_size() : nullptr);
}

std::vector<int64_t> epoch_order(size_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  if (!shuffle || n < 2) return order;
  Rng rng(mix_seed(seed, static_cast<uint64_t>(epoch)));
  // Fisher-Yates from the back: position i takes a uniform pick among the first i + 1.
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  return order;
}

}  // namespace seqtrain
