// The reference backend's row-wise ops: cross-entropy, LayerNorm, the embedding lookup and
// dropout, written straight from their definitions (backend.h) with every sum in double, one
// thread, no vectors. They are the oracle of the CPU kernels (tests/test_backend_ops.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/dropout_mask.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace seqtrain {
namespace {

// log(sum exp(z)) of one row, shifted by the max so exp never overflows.
double logsumexp(const float* z, int64_t C) {
  const double m = *std::max_element(z, z + C);
  double s = 0;
  for (int64_t j = 0; j < C; ++j) s += std::exp(static_cast<double>(z[j]) - m);
  return m + std::log(s);
}

// Row statistics in double: the mean and 1 / sqrt(biased variance + eps).
void row_moments(const float* x, int64_t C, float eps, double& mean, double& rstd) {
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += x[c];
  mean = s / static_cast<double>(C);
  double v = 0;
  for (int64_t c = 0; c < C; ++c) v += (x[c] - mean) * (x[c] - mean);
  rstd = 1.0 / std::sqrt(v / static_cast<double>(C) + eps);
}

// y[i] = keep(seed, i) ? x[i] * scale : 0: dropout's forward on x and its backward on dy. One
// float product per element and no sum, so every implementation can (and the CPU's does) give
// these exact values.
void dropout_map(const float* x, float* y, int64_t n, float p, uint64_t seed, int64_t first = 0) {
  const float scale = dropout_scale(p);
  for (int64_t i = 0; i < n; ++i) y[i] = dropout_keep(seed, first + i, p) ? x[i] * scale : 0.f;
}

}  // namespace

CrossEntropySum ReferenceBackend::cross_entropy_forward(const CrossEntropyArgs& a) {
  check_cross_entropy_args(a);
  const int64_t C = a.classes;
  CrossEntropySum s;
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t t = a.targets[i];
    if (t == a.ignore_index) continue;
    const float* z = a.logits + i * C;
    const double lse = logsumexp(z, C);
    if (a.lse) a.lse[i] = static_cast<float>(lse);
    s.loss += lse - z[t];
    ++s.count;
    s.correct += std::max_element(z, z + C) - z == t;
  }
  return s;
}

void ReferenceBackend::cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) {
  check_cross_entropy_args(a);
  ST_CHECK(dlogits, "cross_entropy backward: dlogits must be given (null pointer)");
  const int64_t C = a.classes;
  for (int64_t i = 0; i < a.rows; ++i) {
    float* g = dlogits + i * C;
    const int64_t t = a.targets[i];
    if (t == a.ignore_index) { std::fill(g, g + C, 0.f); continue; }
    const float* z = a.logits + i * C;
    const double lse = a.lse ? a.lse[i] : logsumexp(z, C);
    for (int64_t j = 0; j < C; ++j) g[j] = static_cast<float>(scale * (std::exp(z[j] - lse) - (j == t)));
  }
}

void ReferenceBackend::layer_norm_forward(const LayerNormArgs& a, float* y) {
  check_layer_norm_args(a);
  ST_CHECK(y, "LayerNorm forward: y must be given (null pointer)");
  const int64_t C = a.channels;
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * C;
    double mu = 0, rs = 0;
    row_moments(x, C, a.eps, mu, rs);
    a.mean[r] = static_cast<float>(mu);
    a.rstd[r] = static_cast<float>(rs);
    for (int64_t c = 0; c < C; ++c) {
      const double v = (x[c] - mu) * rs * a.weight[c] + (a.bias ? a.bias[c] : 0.0);
      y[r * C + c] = static_cast<float>(v);
    }
  }
}

void ReferenceBackend::layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                           float* dbias) {
  check_layer_norm_args(a);
  ST_CHECK(dy && dx && dweight, "LayerNorm backward: dy, dx and dweight must be given (null pointer)");
  const int64_t C = a.channels;
  std::vector<double> dw(C, 0.0), db(C, 0.0);
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * C;
    const float* g = dy + r * C;
    const double mu = a.mean[r], rs = a.rstd[r];
    double m1 = 0, m2 = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - mu) * rs, dxhat = static_cast<double>(g[c]) * a.weight[c];
      m1 += dxhat;
      m2 += dxhat * xhat;
      dw[c] += g[c] * xhat;
      db[c] += g[c];
    }
    m1 /= static_cast<double>(C);
    m2 /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - mu) * rs;
      dx[r * C + c] = static_cast<float>(rs * (static_cast<double>(g[c]) * a.weight[c] - m1 - xhat * m2));
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    dweight[c] = static_cast<float>(dweight[c] + dw[c]);
    if (dbias) dbias[c] = static_cast<float>(dbias[c] + db[c]);
  }
}

void ReferenceBackend::embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) {
  check_embedding_args(a);
  ST_CHECK(table && (y || a.count == 0), "Embedding forward: table and y must be given (null pointer)");
  for (int64_t i = 0; i < a.count; ++i)
    for (int64_t j = 0; j < a.dim; ++j) {
      const float v = table[a.ids[i] * a.dim + j];
      y[i * a.dim + j] = accumulate ? y[i * a.dim + j] + v : v;
    }
}

void ReferenceBackend::embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) {
  check_embedding_args(a);
  ST_CHECK(dtable && (dy || a.count == 0), "Embedding backward: dy and dtable must be given (null pointer)");
  for (int64_t i = 0; i < a.count; ++i)
    for (int64_t j = 0; j < a.dim; ++j) dtable[a.ids[i] * a.dim + j] += dy[i * a.dim + j];
}

void ReferenceBackend::dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) {
  check_dropout_args(x, y, n, p);
  dropout_map(x, y, n, p, resolve_seed(seed));  // the host's memory
}

void ReferenceBackend::dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) {
  check_dropout_args(dy, dx, n, p);
  dropout_map(dy, dx, n, p, resolve_seed(seed));
}

void ReferenceBackend::dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) {
  check_dropout_args(x, y, n, p);
  dropout_map(x, y, n, p, resolve_seed(seed), first);
}

}  // namespace seqtrain
