// Chronological train/val/test split of a series' rows, and the window arithmetic on a split.
// Splits are contiguous row ranges in time order (train first) so that validation and test
// measure forecasting of the future, never interpolation between training rows.
#pragma once
#include <array>
#include <cstdint>

namespace seqtrain {

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end - begin; }
  bool operator==(const RowRange&) const = default;
};

// Rows of each split for N rows and fractions [f0, f1, f2] (see docs/DATA.md):
// train = floor(N*f0) rows from 0, val = floor(N*f1) rows after it, and test = the rest when
// the fractions sum to 1 (so rounding never loses rows), else floor(N*f2) rows; test is
// empty when f2 == 0. floor() forgives 1e-6 so that 0.29 * 100 gives 29, not 28.
std::array<RowRange, 3> split_rows(int64_t n, const std::array<double, 3>& fractions);

// Throws Error naming data.split and the row counts when a split with a positive fraction
// has fewer than lookback + horizon rows (not even one window).
// n_rows is the series' row count, quoted in the message.
void check_split(int64_t n_rows, const std::array<RowRange, 3>& ranges, const std::array<double, 3>& fractions,
                 int64_t lookback, int64_t horizon);

// floor((rows - lookback - horizon) / stride) + 1, or 0 when rows < lookback + horizon.
int64_t window_count(int64_t rows, int64_t lookback, int64_t horizon, int64_t stride);

}  // namespace seqtrain
