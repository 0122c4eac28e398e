#include "data/split.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace seqtrain {
namespace {

int64_t floor_rows(int64_t n, double f) {
  return static_cast<int64_t>(std::floor(static_cast<double>(n) * f + 1e-6));
}

}  // namespace

std::array<RowRange, 3> split_rows(int64_t n, const std::array<double, 3>& f) {
  ST_CHECK(n >= 0, "split_rows: negative row count {}", n);
  int64_t n_train = std::min(n, floor_rows(n, f[0]));
  int64_t n_val = std::min(n - n_train, floor_rows(n, f[1]));
  int64_t n_test = 0;
  if (f[2] > 0) {
    bool whole = std::abs(f[0] + f[1] + f[2] - 1.0) <= 1e-9;
    n_test = whole ? n - n_train - n_val : std::min(n - n_train - n_val, floor_rows(n, f[2]));
  }
  std::array<RowRange, 3> r;
  r[0] = {0, n_train};
  r[1] = {n_train, n_train + n_val};
  r[2] = {n_train + n_val, n_train + n_val + n_test};
  return r;
}

void check_split(int64_t n_rows, const std::array<RowRange, 3>& r, const std::array<double, 3>& f,
                 int64_t lookback, int64_t horizon) {
  static const char* names[3] = {"train", "validation", "test"};
  const int64_t need = lookback + horizon;
  for (int i = 0; i < 3; ++i) {
    if (f[i] <= 0 || r[i].size() >= need) continue;
    fail("data.split [{}, {}, {}] gives the {} split {} of the {} rows (rows [{}, {})), but one window needs "
         "data.lookback + data.horizon = {} rows; use more data, raise that fraction or lower data.lookback{}",
         f[0], f[1], f[2], names[i], r[i].size(), n_rows, r[i].begin, r[i].end, need,
         i == 0 ? "" : ", or set that fraction to 0 to have no such split");
  }
}

int64_t window_count(int64_t rows, int64_t lookback, int64_t horizon, int64_t stride) {
  ST_CHECK(lookback >= 1 && horizon >= 1 && stride >= 1, "window_count: lookback {}, horizon {}, stride {} must be >= 1",
           lookback, horizon, stride);
  if (rows < lookback + horizon) return 0;
  return (rows - lookback - horizon) / stride + 1;
}

}  // namespace seqtrain
