// A Linear's bias gradient at this level's vector width: db[j] += the sum over rows of dy[i, j].
// Each column sums its rows in row order, so the result is bit for bit the serial loop's for any
// width, level and thread count (CpuBackend::bias_grad splits the columns, never the rows).
// Compiled per level because the baseline build is SSE2: its 64-column block did not fit in
// registers there and reloaded db on every row.
#include "backend/cpu/kernels/level.h"

namespace seqtrain::ST_ISA_NS {
namespace {

// W columns, W a compile-time width so the sums stay in registers across the rows.
template <int64_t W>
void sum_columns(const float* dy, float* db, int64_t rows, int64_t cols) {
  float acc[W];
  for (int64_t j = 0; j < W; ++j) acc[j] = db[j];
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = dy + i * cols;
    for (int64_t j = 0; j < W; ++j) acc[j] += row[j];
  }
  for (int64_t j = 0; j < W; ++j) db[j] = acc[j];
}

}  // namespace

void bias_grad_columns(const float* dy, float* db, int64_t rows, int64_t cols, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 32 <= j1; j += 32) sum_columns<32>(dy + j, db + j, rows, cols);
  for (; j + 8 <= j1; j += 8) sum_columns<8>(dy + j, db + j, rows, cols);
  for (; j < j1; ++j) sum_columns<1>(dy + j, db + j, rows, cols);
}

}  // namespace seqtrain::ST_ISA_NS
