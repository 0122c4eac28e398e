// The reference backend's self-attention (causal or not, with an optional key-padding mask): the
// definition, written out per (b, h) with the whole T x T probability matrix in double (zero
// where the mask hides a key), no tiling, no online softmax, no threads. It is the oracle of the
// CPU flash kernels (tests/test_gpt_layers.cpp, tests/test_attention.cpp). Backward recomputes everything it
// needs in double from qkv (it checks but does not use the forward's y and lse): its gradient is
// the exact gradient of its own forward, D_i included (rowsum of dropped p times dP, which is
// rowsum(dy_i * y_i) with y in double).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/attention_dropout.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace seqtrain {
namespace {

struct HeadView {
  const float* q; const float* k; const float* v;  // row stride ld
  int64_t ld, T, D;
  double qk(int64_t i, int64_t j) const {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[i * ld + d]) * k[j * ld + d];
    return s;
  }
};

HeadView head_view(const AttentionArgs& a, int64_t b, int64_t h) {
  const int64_t C = a.channels, D = C / a.heads, ld = 3 * C;
  const float* base = a.qkv + b * a.seq * ld + h * D;
  return {base, base + C, base + 2 * C, ld, a.seq, D};
}

// Whether query i of batch row b attends to key j: causal order, then the key-padding mask.
bool visible(const AttentionArgs& a, int64_t b, int64_t i, int64_t j) {
  if (a.causal && j > i) return false;
  return !(a.key_padding_mask && a.key_padding_mask[b * a.seq + j]);
}

// p[i][j] (softmax, before dropout; 0 where the key is not visible) and the dropout factors
// kf[i][j] of head (b, h). A row with no visible key keeps p = 0 and gets lse -inf (backend.h).
void probabilities(const AttentionArgs& a, const HeadView& hv, int64_t b, int64_t h, std::vector<double>& p,
                   std::vector<double>& kf, std::vector<double>* lse) {
  const int64_t T = hv.T;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hv.D));
  const double keep_scale = a.dropout < 1.f ? 1.0 / (1.0 - a.dropout) : 0.0;
  const uint64_t seed = resolve_seed(a.seed);  // the host's memory
  p.assign(T * T, 0.0);
  kf.assign(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i) {
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < T; ++j)
      if (visible(a, b, i, j)) m = std::max(m, p[i * T + j] = scale * hv.qk(i, j));
    for (int64_t j = 0; j < T; ++j)
      if (visible(a, b, i, j)) l += p[i * T + j] = std::exp(p[i * T + j] - m);
    for (int64_t j = 0; j < T; ++j) {
      if (l > 0) p[i * T + j] /= l;
      kf[i * T + j] = a.dropout == 0.f ? 1.0 : attention_keep(seed, b + a.batch_offset, h, i, j, a.dropout) ? keep_scale : 0.0;
    }
    if (lse) (*lse)[i] = l > 0 ? m + std::log(l) : -INFINITY;
  }
}

}  // namespace

void ReferenceBackend::attention_forward(const AttentionArgs& a) {
  check_attention_args(a);
  if (a.compute == DType::bf16) require(BackendOp::attention_bf16);
  const int64_t T = a.seq, C = a.channels;
  std::vector<double> p, kf, lse(T);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const HeadView hv = head_view(a, b, h);
      probabilities(a, hv, b, h, p, kf, &lse);
      for (int64_t i = 0; i < T; ++i) {
        a.lse[(b * a.heads + h) * T + i] = static_cast<float>(lse[i]);
        for (int64_t d = 0; d < hv.D; ++d) {
          double s = 0;
          for (int64_t j = 0; j < T; ++j) s += p[i * T + j] * kf[i * T + j] * hv.v[j * hv.ld + d];
          a.y[(b * T + i) * C + h * hv.D + d] = static_cast<float>(s);
        }
      }
    }
}

void ReferenceBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  check_attention_args(a);
  ST_CHECK(dy && dqkv, "attention backward: dy and dqkv must be given (null pointer)");
  if (a.compute == DType::bf16) require(BackendOp::attention_bf16);
  const int64_t T = a.seq, C = a.channels, ld = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(C / a.heads));
  std::vector<double> p, kf, dq, dk, dv;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const HeadView hv = head_view(a, b, h);
      const int64_t D = hv.D;
      const float* g = dy + b * T * C + h * D;
      probabilities(a, hv, b, h, p, kf, nullptr);
      dq.assign(T * D, 0.0); dk.assign(T * D, 0.0); dv.assign(T * D, 0.0);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dp(T);  // dL/dp[i][j] through the dropout (p = 0 where hidden)
        double Di = 0;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(g[i * C + d]) * hv.v[j * ld + d];
          dp[j] = s * kf[i * T + j];
          Di += dp[j] * p[i * T + j];
        }
        for (int64_t j = 0; j < T; ++j) {
          const double ds = p[i * T + j] * (dp[j] - Di) * scale, pd = p[i * T + j] * kf[i * T + j];
          for (int64_t d = 0; d < D; ++d) {
            dq[i * D + d] += ds * hv.k[j * ld + d];
            dk[j * D + d] += ds * hv.q[i * ld + d];
            dv[j * D + d] += pd * g[i * C + d];
          }
        }
      }
      float* out = dqkv + b * T * ld + h * D;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          out[t * ld + d] = static_cast<float>(dq[t * D + d]);
          out[t * ld + C + d] = static_cast<float>(dk[t * D + d]);
          out[t * ld + 2 * C + d] = static_cast<float>(dv[t * D + d]);
        }
    }
}

}  // namespace seqtrain
