// Where NaN or inf first appears in a run of floats: the data readers and the checkpoint writer
// refuse such values, naming where they are.
#pragma once

#include <cmath>
#include <cstdint>

namespace seqtrain {

// The index of the first of n values that is NaN or inf, or -1 (one branch-free pass for the
// usual answer, a second only when there is something to find).
inline int64_t first_non_finite(const float* v, int64_t n) {
  bool finite = true;
  for (int64_t k = 0; k < n; ++k) finite &= std::isfinite(v[k]);
  if (finite) return -1;
  int64_t k = 0;
  while (std::isfinite(v[k])) ++k;
  return k;
}

}  // namespace seqtrain
