#include "backend/cpu/rnn_fused.h"

#include <algorithm>

#include <cmath>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_fp16.h"
#include "core/error.h"

namespace seqtrain {
namespace {

// exp for the gate loops, written so the compiler vectorizes it (glibc's expf stays scalar
// without -ffast-math): e^x = 2^n * e^r with n = round(x / ln 2), |r| <= ln2/2, and e^r from
// a degree-6 Taylor polynomial (relative error below 2e-7 on that range).
inline float fast_exp(float x) {
  x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer in plain float arithmetic.
  const float n = (x * 1.44269504f + 12582912.f) - 12582912.f;
  const float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;  // ln 2 split in two
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline float sigmoid(float v) { return 1.f / (1.f + fast_exp(-v)); }
// tanh(v) = 1 - 2 / (e^{2v} + 1): no cancellation for large |v|; near 0 the absolute error
// stays ~1e-7, which is what the gates need.
inline float fast_tanh(float v) { return 1.f - 2.f / (fast_exp(2.f * v) + 1.f); }

// Time index of the s-th processed step.
inline int64_t time_of(const FusedRnnArgs& a, int64_t s) { return a.reverse ? a.T - 1 - s : s; }

// Parallel over batch rows only when there is enough work to pay for waking the team.
inline bool worth_threads(int64_t n) { return n >= 8192; }

void lstm_step_forward(const FusedRnnArgs& a, int64_t s) {
  const int64_t t = time_of(a, s), N = a.N, H = a.H, G4 = 4 * H;
  float* g = a.gates + t * N * G4;  // holds x W_ih^T, becomes activated gates
  const float* gh = a.scratch;        // h_prev W_hh^T (not written at the first step)
  float* c = a.extra + t * N * H;
  const float* c_prev = s ? a.extra + time_of(a, s - 1) * N * H : nullptr;
  float* h = a.out + t * N * a.ld_out;
#pragma omp parallel for if (worth_threads(N * H))
  for (int64_t n = 0; n < N; ++n) {
    float* gn = g + n * G4;
    const float* ghn = gh + n * G4;
    float* cn = c + n * H;
    float* hn = h + n * a.ld_out;
    const float* cp = c_prev ? c_prev + n * H : nullptr;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const float hi = cp ? ghn[j] : 0.f, hf = cp ? ghn[H + j] : 0.f;
      const float hg = cp ? ghn[2 * H + j] : 0.f, ho = cp ? ghn[3 * H + j] : 0.f;
      const float i = sigmoid(gn[j] + hi + a.b_ih[j] + a.b_hh[j]);
      const float f = sigmoid(gn[H + j] + hf + a.b_ih[H + j] + a.b_hh[H + j]);
      const float gg = fast_tanh(gn[2 * H + j] + hg + a.b_ih[2 * H + j] + a.b_hh[2 * H + j]);
      const float o = sigmoid(gn[3 * H + j] + ho + a.b_ih[3 * H + j] + a.b_hh[3 * H + j]);
      const float cv = (cp ? f * cp[j] : 0.f) + i * gg;
      gn[j] = i; gn[H + j] = f; gn[2 * H + j] = gg; gn[3 * H + j] = o;
      cn[j] = cv;
      hn[j] = o * fast_tanh(cv);
    }
    if (a.h_bf) f32_to_half(a.half, hn, a.h_bf + (t * N + n) * H, H);  // while the row is in cache
  }
}

void gru_step_forward(const FusedRnnArgs& a, int64_t s) {
  const int64_t t = time_of(a, s), N = a.N, H = a.H, G3 = 3 * H;
  float* g = a.gates + t * N * G3;   // holds x W_ih^T, becomes r, z, n
  float* ghn = a.extra + t * N * H;  // W_hn h_prev + b_hn
  const float* gh = a.scratch;       // h_prev W_hh^T (zero at the first step)
  const float* h_prev = s ? a.out + time_of(a, s - 1) * N * a.ld_out : nullptr;
  float* h = a.out + t * N * a.ld_out;
#pragma omp parallel for if (worth_threads(N * H))
  for (int64_t n = 0; n < N; ++n) {
    float* gn = g + n * G3;
    const float* ghr = gh + n * G3;
    float* hn = h + n * a.ld_out;
    float* en = ghn + n * H;
    const float* hp = h_prev ? h_prev + n * a.ld_out : nullptr;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const float hr = hp ? ghr[j] : 0.f, hz = hp ? ghr[H + j] : 0.f, hh = hp ? ghr[2 * H + j] : 0.f;
      const float r = sigmoid(gn[j] + a.b_ih[j] + hr + a.b_hh[j]);
      const float z = sigmoid(gn[H + j] + a.b_ih[H + j] + hz + a.b_hh[H + j]);
      const float e = hh + a.b_hh[2 * H + j];
      const float nv = fast_tanh(gn[2 * H + j] + a.b_ih[2 * H + j] + r * e);
      gn[j] = r; gn[H + j] = z; gn[2 * H + j] = nv;
      en[j] = e;
      hn[j] = (1.f - z) * nv + z * (hp ? hp[j] : 0.f);
    }
    if (a.h_bf) f32_to_half(a.half, hn, a.h_bf + (t * N + n) * H, H);
  }
}

// out[j] += sum over the N rows of rows[n * G + j] (and the same into out2 when given): the bias
// gradients of one step, taken while its gate-gradient rows are still in cache. Each column
// block is summed by one thread in row order, so the result does not depend on the thread count.
void add_column_sums(const float* rows, int64_t N, int64_t G, float* out, float* out2) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for if (worth_threads(N * G))
  for (int64_t j0 = 0; j0 < G; j0 += kBlock) {
    const int64_t w = std::min(kBlock, G - j0);
    float acc[kBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const float* r = rows + n * G + j0;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += r[j];
    }
    for (int64_t j = 0; j < w; ++j) {
      out[j0 + j] += acc[j];
      if (out2) out2[j0 + j] += acc[j];
    }
  }
}

}  // namespace

void fused_rnn_forward(const FusedRnnArgs& a) {
  const int64_t G = rnn_gates(a.cell) * a.H, N = a.N;
  const bool bf = a.bf16(), lstm = a.cell == RnnCell::lstm;
  ST_CHECK(!bf || a.rec || a.w_hh_bf, "fused_rnn_forward: 16-bit mode without a RecurrentGemm needs w_hh_bf");
  // Input projection of every step at once.
  if (bf) gemm_half(a.half, false, true, a.T * N, G, a.C, a.x_bf, a.C, a.w_ih_bf, a.C, false, a.gates, G);
  else gemm(false, true, a.T * N, G, a.C, 1.f, a.x, a.C, a.w_ih, a.C, 0.f, a.gates, G);
  // h_prev W_hh^T goes to scratch, and the gate pass adds it: the GRU's n gate needs W_hn h_prev
  // on its own, and for the LSTM an accumulating matmul (a sum post-op) is slower than the
  // extra read in the gate pass (by half at W1's shape: bench_recurrent_gemm, recurrent_acc).
  const int64_t ld_h = bf ? a.H : a.ld_out;
  if (a.rec && a.T > 1)
    a.rec->prepare(RecurrentGemm::Shape{RecurrentGemm::Op::forward, bf, false, N, G, a.H, ld_h, G}, a.w_hh);
  for (int64_t s = 0; s < a.T; ++s) {
    if (s) {
      const int64_t tp = time_of(a, s - 1);
      const float* h_prev = a.out + tp * N * a.ld_out;
      const uint16_t* hb_prev = bf ? a.h_bf + tp * N * a.H : nullptr;
      if (a.rec) a.rec->run(bf ? static_cast<const void*>(hb_prev) : h_prev, a.scratch);
      else if (bf) gemm_half(a.half, false, true, N, G, a.H, hb_prev, a.H, a.w_hh_bf, a.H, false, a.scratch, G);
      else gemm(false, true, N, G, a.H, 1.f, h_prev, a.ld_out, a.w_hh, a.H, 0.f, a.scratch, G);
    }
    if (lstm) lstm_step_forward(a, s);
    else gru_step_forward(a, s);
  }
}

void fused_rnn_backward(const FusedRnnArgs& a, const FusedRnnGrads& g) {
  const int64_t N = a.N, H = a.H, G = rnn_gates(a.cell) * H, ld = a.ld_out;
  const bool lstm = a.cell == RnnCell::lstm;
  const bool bf = a.bf16();
  ST_CHECK(!bf || (g.dgi_bf && (lstm || g.dgh_bf)), "fused_rnn_backward: 16-bit mode needs dgi_bf/dgh_bf");
  ST_CHECK(!bf || g.rec || a.w_hh_bf, "fused_rnn_backward: 16-bit mode without a RecurrentGemm needs w_hh_bf");
  std::memset(g.dh, 0, N * H * sizeof(float));
  std::memset(g.dc, 0, N * H * sizeof(float));
  // dh_prev = dgates W_hh: the LSTM's replaces dh, the GRU's adds to its direct path.
  if (g.rec && a.T > 1)
    g.rec->prepare(RecurrentGemm::Shape{RecurrentGemm::Op::backward, bf, !lstm, N, G, H, G, H}, a.w_hh);
  for (int64_t s = a.T; s-- > 0;) {
    const int64_t t = time_of(a, s);
    const float* gates = a.gates + t * N * G;
    const float* dout = g.dout + t * N * ld;
    float* dgi = g.dgi + t * N * G;
    float* dgh = g.dgh + t * N * G;
    // 16-bit copies of this step's gate gradients, written row by row inside the gate loops.
    uint16_t* dgi_b = bf ? g.dgi_bf + t * N * G : nullptr;
    uint16_t* dgh_b = bf && !lstm ? g.dgh_bf + t * N * G : nullptr;
    const bool first = s == 0;
    const int64_t tp = first ? 0 : time_of(a, s - 1);
    if (lstm) {
      const float* c = a.extra + t * N * H;
      const float* c_prev = first ? nullptr : a.extra + tp * N * H;
#pragma omp parallel for if (worth_threads(N * H))
      for (int64_t n = 0; n < N; ++n) {
        const float* gn = gates + n * G;
        float* d = dgi + n * G;
        float* dhn = g.dh + n * H;
        float* dcn = g.dc + n * H;
#pragma omp simd
        for (int64_t j = 0; j < H; ++j) {
          const float i = gn[j], f = gn[H + j], gg = gn[2 * H + j], o = gn[3 * H + j];
          const float tc = fast_tanh(c[n * H + j]);
          const float dh = dout[n * ld + j] + dhn[j];
          const float dcv = dcn[j] + dh * o * (1.f - tc * tc);
          const float cp = c_prev ? c_prev[n * H + j] : 0.f;
          d[j] = dcv * gg * i * (1.f - i);
          d[H + j] = dcv * cp * f * (1.f - f);
          d[2 * H + j] = dcv * i * (1.f - gg * gg);
          d[3 * H + j] = dh * tc * o * (1.f - o);
          dcn[j] = dcv * f;
        }
        if (dgi_b) f32_to_half(a.half, d, dgi_b + n * G, G);
      }
      add_column_sums(dgi, N, G, g.db_ih, g.db_hh);  // the LSTM's two biases get equal gradients
      if (!first) {
        if (g.rec) g.rec->run(bf ? static_cast<const void*>(dgi_b) : dgi, g.dh);
        else if (bf) gemm_half(a.half, false, false, N, H, G, dgi_b, G, a.w_hh_bf, H, false, g.dh, H);
        else gemm(false, false, N, H, G, 1.f, dgi, G, a.w_hh, H, 0.f, g.dh, H);
      }
    } else {
      const float* e = a.extra + t * N * H;
      const float* h_prev = first ? nullptr : a.out + tp * N * ld;
#pragma omp parallel for if (worth_threads(N * H))
      for (int64_t n = 0; n < N; ++n) {
        const float* gn = gates + n * G;
        float* di = dgi + n * G;
        float* dr = dgh + n * G;
        float* dhn = g.dh + n * H;
#pragma omp simd
        for (int64_t j = 0; j < H; ++j) {
          const float r = gn[j], z = gn[H + j], nv = gn[2 * H + j];
          const float hp = h_prev ? h_prev[n * ld + j] : 0.f;
          const float dh = dout[n * ld + j] + dhn[j];
          const float dn = dh * (1.f - z) * (1.f - nv * nv);
          const float dz = dh * (hp - nv) * z * (1.f - z);
          const float drr = dn * e[n * H + j] * r * (1.f - r);
          di[j] = drr; di[H + j] = dz; di[2 * H + j] = dn;
          dr[j] = drr; dr[H + j] = dz; dr[2 * H + j] = dn * r;
          dhn[j] = dh * z;  // the direct path; the gate paths are added by the GEMM below
        }
        if (dgi_b) {
          f32_to_half(a.half, di, dgi_b + n * G, G);
          f32_to_half(a.half, dr, dgh_b + n * G, G);
        }
      }
      add_column_sums(dgi, N, G, g.db_ih, nullptr);
      add_column_sums(dgh, N, G, g.db_hh, nullptr);
      if (!first) {
        if (g.rec) g.rec->run(bf ? static_cast<const void*>(dgh_b) : dgh, g.dh);
        else if (bf) gemm_half(a.half, false, false, N, H, G, dgh_b, G, a.w_hh_bf, H, true, g.dh, H);
        else gemm(false, false, N, H, G, 1.f, dgh, G, a.w_hh, H, 1.f, g.dh, H);
      }
    }
  }
  const float* dgh = lstm ? g.dgi : g.dgh;
  const int64_t TN = a.T * N;
  // Whole-sequence GEMMs: dW_ih, dx, dW_hh (each step's h_prev is the neighbouring output).
  if (bf) {
    const uint16_t* dgh_b = lstm ? g.dgi_bf : g.dgh_bf;
    gemm_half(a.half, true, false, G, a.C, TN, g.dgi_bf, G, a.x_bf, a.C, true, g.dw_ih, a.C);
    if (g.dx) gemm_half(a.half, false, false, TN, a.C, G, g.dgi_bf, G, a.w_ih_bf, a.C, g.accumulate_dx, g.dx, a.C);
    if (a.T > 1) {
      const int64_t rows = (a.T - 1) * N;
      const uint16_t* d = a.reverse ? dgh_b : dgh_b + N * G;
      const uint16_t* hp = a.reverse ? a.h_bf + N * H : a.h_bf;
      gemm_half(a.half, true, false, G, H, rows, d, G, hp, H, true, g.dw_hh, H);
    }
  } else {
    gemm(true, false, G, a.C, TN, 1.f, g.dgi, G, a.x, a.C, 1.f, g.dw_ih, a.C);
    if (g.dx) gemm(false, false, TN, a.C, G, 1.f, g.dgi, G, a.w_ih, a.C, g.accumulate_dx ? 1.f : 0.f, g.dx, a.C);
    if (a.T > 1) {
      const int64_t rows = (a.T - 1) * N;
      // Forward direction: steps 1..T-1 pair with outputs 0..T-2; reverse: steps 0..T-2 with 1..T-1.
      const float* d = a.reverse ? dgh : dgh + N * G;
      const float* hp = a.reverse ? a.out + N * ld : a.out;
      gemm(true, false, G, H, rows, 1.f, d, G, hp, ld, 1.f, g.dw_hh, H);
    }
  }
}

}  // namespace seqtrain
