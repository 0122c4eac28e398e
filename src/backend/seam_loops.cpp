#include "backend/seam_loops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace seqtrain {

void axpy_loop(float alpha, const float* x, float* y, size_t n, bool parallel) {
  const int64_t len = static_cast<int64_t>(n);
#pragma omp parallel for schedule(static) if (parallel && len > (1 << 16))
  for (int64_t i = 0; i < len; ++i) y[i] += alpha * x[i];
}

void add_loop(const float* a, const float* b, float* out, size_t n, bool parallel) {
  const int64_t len = static_cast<int64_t>(n);
#pragma omp parallel for simd schedule(static) if (parallel && len > (1 << 16))
  for (int64_t i = 0; i < len; ++i) out[i] = a[i] + b[i];
}

void transpose_loop(const float* x, float* y, int64_t A, int64_t B, int64_t C, bool parallel) {
#pragma omp parallel for collapse(2) if (parallel && A * B * C > 65536)
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) std::memcpy(y + (b * A + a) * C, x + (a * B + b) * C, C * sizeof(float));
}

double regression_sum_loop(RegressionLoss kind, const float* p, const float* y, int64_t n, float delta) {
  double sum = 0;
  switch (kind) {
    case RegressionLoss::mse:
      for (int64_t i = 0; i < n; ++i) { const double d = double(p[i]) - y[i]; sum += d * d; }
      break;
    case RegressionLoss::mae:
      for (int64_t i = 0; i < n; ++i) sum += std::abs(double(p[i]) - y[i]);
      break;
    case RegressionLoss::huber: {
      const double dl = delta;
      for (int64_t i = 0; i < n; ++i) {
        const double a = std::abs(double(p[i]) - y[i]);
        sum += a < dl ? 0.5 * a * a : dl * (a - 0.5 * dl);
      }
      break;
    }
  }
  return sum;
}

void regression_grad_loop(RegressionLoss kind, const float* p, const float* y, int64_t n, float delta, float k,
                          float* g) {
  switch (kind) {
    case RegressionLoss::mse:
      for (int64_t i = 0; i < n; ++i) g[i] = 2.f * k * (p[i] - y[i]);
      break;
    case RegressionLoss::mae:
      for (int64_t i = 0; i < n; ++i) {
        const float d = p[i] - y[i];
        g[i] = d > 0.f ? k : (d < 0.f ? -k : 0.f);
      }
      break;
    case RegressionLoss::huber:
      for (int64_t i = 0; i < n; ++i) g[i] = k * std::clamp(p[i] - y[i], -delta, delta);
      break;
  }
}

int64_t token_ids_loop(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  ST_CHECK(from == DType::f32 || from == DType::i64, "token ids: values must be f32 or i64, got {}",
           dtype_name(from));
  for (int64_t i = 0; i < n; ++i) {
    const double v = from == DType::i64 ? static_cast<double>(static_cast<const int64_t*>(x)[i])
                                        : static_cast<const float*>(x)[i];
    if (std::floor(v) != v || !(v >= 0 && v < static_cast<double>(vocab))) return i;
    if (ids) ids[i] = static_cast<int64_t>(v);
  }
  return -1;
}

namespace {
// fn(b, t, r) for every row r = b*T + t of a convolution's [B*T] rows, over OpenMP threads when
// `parallel` and the rows' work is large enough to pay for them.
template <typename Fn>
void conv_rows(const Conv1dArgs& a, bool parallel, Fn&& fn) {
  check_conv1d_args(a);
  const int64_t T = a.steps, rows = a.batch * T;
#pragma omp parallel for schedule(static) if (parallel && rows * a.channels * a.kernel > 65536)
  for (int64_t r = 0; r < rows; ++r) fn(r / T, r % T, r);
}
}  // namespace

// For each tap j the input row it reads, written across the channels (stride k in cols: torch's
// [C_out, C, k] weight order), or zeros outside the sequence or at a padded step.
void im2col_1d_loop(const Conv1dArgs& a, const float* x, float* cols, bool parallel) {
  const int64_t T = a.steps, C = a.channels, k = a.kernel;
  conv_rows(a, parallel, [&](int64_t b, int64_t t, int64_t r) {
    float* out = cols + r * C * k;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t s = t + j - a.pad_left;
      if (s < 0 || s >= T || (a.mask && a.mask[b * T + s])) {
        for (int64_t c = 0; c < C; ++c) out[c * k + j] = 0.f;
        continue;
      }
      const float* src = x + (b * T + s) * C;
      for (int64_t c = 0; c < C; ++c) out[c * k + j] = src[c];
    }
  });
}

// The transpose of im2col as a gather: dx's row (b, s) sums, tap by tap (j ascending), the column
// entries that read it, so no two threads write one element and the order never changes.
void col2im_1d_loop(const Conv1dArgs& a, const float* dcols, float* dx, bool parallel) {
  const int64_t T = a.steps, C = a.channels, k = a.kernel;
  conv_rows(a, parallel, [&](int64_t b, int64_t s, int64_t r) {
    float* out = dx + r * C;
    std::fill(out, out + C, 0.f);
    if (a.mask && a.mask[r]) return;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t t = s - j + a.pad_left;
      if (t < 0 || t >= T) continue;
      const float* src = dcols + (b * T + t) * C * k + j;
      for (int64_t c = 0; c < C; ++c) out[c] += src[c * k];
    }
  });
}

namespace {
// Channels per task of the per-channel sums: each task walks every row once, reading a short
// stretch of it, so the sums stay in registers-sized arrays and their order is the rows'.
constexpr int64_t kBnChannels = 16;

// fn(c0, c1) over [0, C) in stretches of kBnChannels, over OpenMP threads when `parallel` and the
// work is large enough.
template <typename Fn>
void bn_channel_blocks(const BatchNormArgs& a, bool parallel, Fn&& fn) {
  const int64_t blocks = (a.channels + kBnChannels - 1) / kBnChannels;
#pragma omp parallel for schedule(static) if (parallel && a.rows * a.channels > 65536)
  for (int64_t blk = 0; blk < blocks; ++blk)
    fn(blk * kBnChannels, std::min(a.channels, (blk + 1) * kBnChannels));
}

// fn(r) for every row, over OpenMP threads when `parallel` (elementwise work only).
template <typename Fn>
void bn_rows(const BatchNormArgs& a, bool parallel, Fn&& fn) {
#pragma omp parallel for schedule(static) if (parallel && a.rows * a.channels > 65536)
  for (int64_t r = 0; r < a.rows; ++r) fn(r);
}

bool bn_valid(const BatchNormArgs& a, int64_t r) { return !a.mask || !a.mask[r]; }
}  // namespace

void batch_norm_forward_loop(const BatchNormArgs& a, float* y, bool parallel) {
  check_batch_norm_args(a);
  const int64_t C = a.channels;
  if (a.training) {
    const double n = static_cast<double>(a.count), m = a.momentum;
    bn_channel_blocks(a, parallel, [&](int64_t c0, int64_t c1) {
      double sum[kBnChannels] = {}, sq[kBnChannels] = {};
      for (int64_t r = 0; r < a.rows; ++r) {
        if (!bn_valid(a, r)) continue;
        const float* x = a.x + r * C;
        for (int64_t c = c0; c < c1; ++c) sum[c - c0] += x[c];
      }
      for (int64_t c = c0; c < c1; ++c) sum[c - c0] /= n;  // the means
      for (int64_t r = 0; r < a.rows; ++r) {
        if (!bn_valid(a, r)) continue;
        const float* x = a.x + r * C;
        for (int64_t c = c0; c < c1; ++c) {
          const double d = x[c] - sum[c - c0];
          sq[c - c0] += d * d;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        const double mean = sum[c - c0], var = sq[c - c0] / n;
        a.mean[c] = static_cast<float>(mean);
        a.rstd[c] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(a.eps)));
        a.running_mean[c] = static_cast<float>(m * mean + (1.0 - m) * a.running_mean[c]);
        a.running_var[c] = static_cast<float>(m * var * n / (n - 1.0) + (1.0 - m) * a.running_var[c]);
      }
    });
    *a.num_batches_tracked += 1.f;
  } else {
    for (int64_t c = 0; c < C; ++c) {
      a.mean[c] = a.running_mean[c];
      a.rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.running_var[c]) + a.eps));
    }
  }
  bn_rows(a, parallel, [&](int64_t r) {
    float* out = y + r * C;
    if (!bn_valid(a, r)) {
      std::fill(out, out + C, 0.f);
      return;
    }
    const float* x = a.x + r * C;
    for (int64_t c = 0; c < C; ++c) out[c] = (x[c] - a.mean[c]) * a.rstd[c] * a.weight[c] + a.bias[c];
  });
}

void batch_norm_backward_loop(const BatchNormArgs& a, const float* dy, float* dx, float* dweight, float* dbias,
                              bool parallel) {
  check_batch_norm_args(a);
  const int64_t C = a.channels;
  // Per channel: S = sum dy, P = sum dy xhat over the valid rows, as floats for dx's formula.
  std::vector<float> s_mean(static_cast<size_t>(C)), p_mean(static_cast<size_t>(C));
  const double n = static_cast<double>(a.count);
  bn_channel_blocks(a, parallel, [&](int64_t c0, int64_t c1) {
    double s[kBnChannels] = {}, p[kBnChannels] = {};
    for (int64_t r = 0; r < a.rows; ++r) {
      if (!bn_valid(a, r)) continue;
      const float* x = a.x + r * C;
      const float* g = dy + r * C;
      for (int64_t c = c0; c < c1; ++c) {
        const float xhat = (x[c] - a.mean[c]) * a.rstd[c];
        s[c - c0] += g[c];
        p[c - c0] += static_cast<double>(g[c]) * xhat;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      if (dweight) dweight[c] += static_cast<float>(p[c - c0]);
      if (dbias) dbias[c] += static_cast<float>(s[c - c0]);
      s_mean[static_cast<size_t>(c)] = a.training ? static_cast<float>(s[c - c0] / n) : 0.f;
      p_mean[static_cast<size_t>(c)] = a.training ? static_cast<float>(p[c - c0] / n) : 0.f;
    }
  });
  bn_rows(a, parallel, [&](int64_t r) {
    float* out = dx + r * C;
    if (!bn_valid(a, r)) {
      std::fill(out, out + C, 0.f);
      return;
    }
    const float* x = a.x + r * C;
    const float* g = dy + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (x[c] - a.mean[c]) * a.rstd[c];
      out[c] = a.weight[c] * a.rstd[c] * (g[c] - s_mean[static_cast<size_t>(c)] - xhat * p_mean[static_cast<size_t>(c)]);
    }
  });
}

}  // namespace seqtrain
