// Cross-entropy fused with log-softmax (backend.h's cross_entropy op) at this level's vector
// width. Each row's logsumexp is one pass over the row with an online max and sum per lane
// (FlashAttention's rescaling: s = s e^(m - m') + e^(x - m')), so a large vocabulary's row is
// read once, then the lanes are combined. The sum runs in double lanes with a double exp (a
// degree-12 polynomial, ~1e-16 relative) because the loss it gives is the number the run logs
// and tests hold to 1e-9 against double arithmetic; a float sum would be off by ~1e-7. The
// per-row loss is (max - z_t) + log(sum), which keeps a confident row's small loss free of the
// cancellation lse - z_t would have. The gradient's probabilities are float, from vec.h's exp
// (relative error below 2e-7). Both replace libm's scalar exp in double per logit, which made
// the loss several percent of a GPT step.
// Threads: rows in blocks of kCrossEntropyBlockRows, each block's sums in its own slot, added in
// block order afterwards, so the totals are the same for any thread count.
#include <cfloat>
#include <cstring>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements; below it one thread (a team costs more)

// Doubles in a register of this level: half as many lanes as floats.
constexpr int64_t kDLanes = kLanes / 2;
using vd = double __attribute__((vector_size(kLanes * 4)));
using vl = int64_t __attribute__((vector_size(kLanes * 4)));
using vfh = float __attribute__((vector_size(kLanes * 2)));

inline vd splat_d(double v) { return vd{} + v; }

// e^x for x <= 0 (clamped at -708, where it is below 1e-307; -inf gives that too):
// x = n ln2 + r, |r| <= ln2/2, ln2 split so n ln2_hi is exact; e^r by its degree-12 Taylor
// polynomial (remainder below 2e-16); 2^n from the exponent bits of the rounding constant's sum.
inline vd exp_d(vd x) {
  x = x < -708.0 ? splat_d(-708.0) : x;
  const double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const vd t = x * 1.4426950408889634 + kRound, n = t - kRound;
  const vd r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  const double c[] = {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
                      1.0 / 720,       1.0 / 120,      1.0 / 24,      1.0 / 6,      0.5,          1.0, 1.0};
  vd p = splat_d(c[0]);
  for (int k = 1; k < 13; ++k) p = p * r + c[k];
  vl bits, round_bits;
  std::memcpy(&bits, &t, sizeof bits);
  const vd rc = splat_d(kRound);
  std::memcpy(&round_bits, &rc, sizeof round_bits);
  const vl e = (bits - round_bits + 1023) << 52;
  vd scale;
  std::memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

inline double exp_scalar(double x) { return exp_d(splat_d(x))[0]; }

struct RowLse {
  float max;       // the row's largest logit
  double log_sum;  // log(sum exp(z - max)); the row's logsumexp is max + log_sum
};

// The online max and sum of one row, in one pass: full vectors of kDLanes, then the tail.
RowLse row_lse(const float* z, int64_t C) {
  vd m = splat_d(-DBL_MAX), s = splat_d(0.0);
  int64_t j = 0;
  for (; j + kDLanes <= C; j += kDLanes) {
    vfh h;
    std::memcpy(&h, z + j, sizeof h);
    const vd x = __builtin_convertvector(h, vd);
    const vd mn = x > m ? x : m;
    s = s * exp_d(m - mn) + exp_d(x - mn);
    m = mn;
  }
  double M = m[0];
  for (int64_t k = 1; k < kDLanes; ++k) M = m[k] > M ? m[k] : M;
  for (int64_t k = j; k < C; ++k) M = z[k] > M ? z[k] : M;
  const vd lane_sums = s * exp_d(m - M);
  double S = 0;
  for (int64_t k = 0; k < kDLanes; ++k) S += lane_sums[k];
  for (int64_t k = j; k < C; ++k) S += exp_scalar(z[k] - M);
  return {static_cast<float>(M), __builtin_log(S)};
}

// Whether t is the first index of the row's largest logit (std::max_element's choice).
bool first_max_is(const float* z, int64_t t, float max) {
  if (z[t] != max) return false;
  for (int64_t j = 0; j < t; ++j)
    if (z[j] == max) return false;
  return true;
}

CrossEntropyTotals block_forward(const CrossEntropyKernelArgs& a, int64_t r0, int64_t r1) {
  CrossEntropyTotals s;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t t = a.targets[r];
    if (t == a.ignore_index) continue;
    const float* z = a.logits + r * a.C;
    const RowLse row = row_lse(z, a.C);
    if (a.lse) a.lse[r] = static_cast<float>(row.max + row.log_sum);
    s.loss += (static_cast<double>(row.max) - z[t]) + row.log_sum;
    ++s.count;
    s.correct += first_max_is(z, t, row.max);
  }
  return s;
}

}  // namespace

CrossEntropyTotals cross_entropy_forward(const CrossEntropyKernelArgs& a) {
  const int64_t nb = (a.rows + kCrossEntropyBlockRows - 1) / kCrossEntropyBlockRows;
#pragma omp parallel for schedule(static) if (a.rows * a.C >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b)
    a.blocks[b] = block_forward(a, b * kCrossEntropyBlockRows, imin(a.rows, (b + 1) * kCrossEntropyBlockRows));
  CrossEntropyTotals total;
  for (int64_t b = 0; b < nb; ++b) {
    total.loss += a.blocks[b].loss;
    total.count += a.blocks[b].count;
    total.correct += a.blocks[b].correct;
  }
  return total;
}

// dz = scale * (e^(z - lse) - onehot(t)); an ignored row's gradient is zeros.
void cross_entropy_backward(const CrossEntropyKernelArgs& a) {
  const int64_t C = a.C;
#pragma omp parallel for schedule(static) if (a.rows * C >= kParallelMin)
  for (int64_t r = 0; r < a.rows; ++r) {
    float* g = a.dlogits + r * C;
    const int64_t t = a.targets[r];
    if (t == a.ignore_index) {
      for_lanes(C, [&](auto l) { l.store(g, splat(0.f)); });
      continue;
    }
    const float* z = a.logits + r * C;
    // z - lse as (z - max) - log(sum) when recomputed: the float lse of a row of large logits
    // would carry |lse| 2^-24 of error into every probability.
    float shift = 0.f, lse = 0.f;
    if (a.lse) {
      lse = a.lse[r];
    } else {
      const RowLse row = row_lse(z, C);
      shift = row.max;
      lse = static_cast<float>(row.log_sum);
    }
    const float scale = a.scale;
    for_lanes(C, [&](auto l) { l.store(g, exp_nonpositive((l.load(z) - shift) - lse) * scale); });
    g[t] -= scale;
  }
}

}  // namespace seqtrain::ST_ISA_NS
