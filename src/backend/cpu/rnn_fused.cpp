#include "backend/cpu/rnn_fused.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/rnn_fused_layout.h"
#include "backend/cpu/gemm_fp16.h"
#include "core/error.h"

namespace seqtrain {
namespace {

using namespace rnn_fused_layout;

const CpuKernels& kernels_of(const FusedRnnArgs& a) { return a.kernels ? *a.kernels : cpu_kernels(); }

// The backward runs its whole-sequence GEMMs on chunks of at least this many rows (time steps
// times batch), right after the gate passes wrote them: the gate gradients are then read from
// cache instead of memory, and only a chunk of them is ever stored (W1: 8 steps, 4 MB instead of
// the sequence's 78 MB a layer). Fewer rows make the GEMMs less efficient.
constexpr int64_t kChunkMinRows = 2048;

// The fewest time steps of N rows each that hold `rows` rows, at least 1 and at most T.
int64_t steps_holding(int64_t rows, int64_t N, int64_t T) {
  return std::min(T, std::max<int64_t>(1, (rows + N - 1) / N));
}

// dw [G, C] += s^T for s [C, G], in tiles so that both sides stay in cache.
void add_transposed(const float* s, int64_t C, int64_t G, float* dw) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) if (C * G >= 65536)
  for (int64_t g0 = 0; g0 < G; g0 += kTile)
    for (int64_t c0 = 0; c0 < C; c0 += kTile)
      for (int64_t g = g0; g < std::min(G, g0 + kTile); ++g)
#pragma omp simd
        for (int64_t c = c0; c < std::min(C, c0 + kTile); ++c) dw[g * C + c] += s[c * G + g];
}

// The weight gradients dW [G, C] = sum of dg^T in over the rows run in fp32 as in^T dg, summed
// into a [C, G] scratch and added transposed at the end of the pass: dnnl_sgemm is faster in
// that form than as dg^T in at every shape measured; the bf16 matmul only at a small C, hence
// kHalfTransposedWgradMaxC (docs/BENCHMARKS.md, "Measurements behind code choices").
constexpr int64_t kHalfTransposedWgradMaxC = 32;

// The whole-sequence GEMMs of the time steps [t0, t1), run as soon as the backward loop has
// written their gate gradients, which are then still in cache: dW_ih and dx over the chunk's
// rows, and dW_hh over the steps whose h_prev is in the sequence (forward direction: t >= 1
// pairs with output t-1; reverse: t <= T-2 with output t+1). The gate gradients of a chunk sit
// at its slots 0 .. t1-t0-1; dW sums go to g.wgrad_scratch ([C, G] then [H, G], fp32 form) or,
// in 16-bit mode, straight into dW.
void chunk_gemms(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t t0, int64_t t1) {
  const int64_t N = a.N, H = a.H, C = a.C, G = rnn_gates(a.cell) * H, ld = a.ld_out;
  const bool lstm = a.cell == RnnCell::lstm;
  const int64_t rows = (t1 - t0) * N;
  const int64_t p0 = a.reverse ? t0 : std::max<int64_t>(t0, 1), p1 = a.reverse ? std::min(t1, a.T - 1) : t1;
  const int64_t pair_rows = std::max<int64_t>(0, p1 - p0) * N, h_row = (a.reverse ? p0 + 1 : p0 - 1) * N;
  float* sum_ih = g.wgrad_scratch;
  float* sum_hh = g.wgrad_scratch + C * G;
  if (a.bf16()) {
    const uint16_t* dgi = g.dgi_bf;
    const uint16_t* dgh = lstm ? g.dgi_bf : g.dgh_bf;
    const uint16_t* x = a.x_bf + t0 * N * C;
    if (C < kHalfTransposedWgradMaxC) gemm_half(a.half, true, false, C, G, rows, x, C, dgi, G, true, sum_ih, G);
    else gemm_half(a.half, true, false, G, C, rows, dgi, G, x, C, true, g.dw_ih, C);
    if (g.dx) gemm_half(a.half, false, false, rows, C, G, dgi, G, a.w_ih_bf, C, g.accumulate_dx, g.dx + t0 * N * C, C);
    if (pair_rows > 0)
      gemm_half(a.half, true, false, G, H, pair_rows, dgh + (p0 - t0) * N * G, G, a.h_bf + h_row * H, H, true, g.dw_hh, H);
  } else {
    const float* dgi = g.dgi;
    const float* dgh = lstm ? g.dgi : g.dgh;
    gemm(true, false, C, G, rows, 1.f, a.x + t0 * N * C, C, dgi, G, 1.f, sum_ih, G);
    if (g.dx) gemm(false, false, rows, C, G, 1.f, dgi, G, a.w_ih, C, g.accumulate_dx ? 1.f : 0.f, g.dx + t0 * N * C, C);
    if (pair_rows > 0)
      gemm(true, false, H, G, pair_rows, 1.f, a.out + h_row * ld, ld, dgh + (p0 - t0) * N * G, G, 1.f, sum_hh, G);
  }
}

// Time steps per input-projection GEMM in the forward: the gate block when there is one
// (checkpointing, 16-bit mode); else chunks of at least kChunkMinRows rows rather than the whole
// sequence, so that the gate pass reads the projection it adds from cache, not memory (W1's
// layer forward 2-4% faster at AVX2 and AVX-512, bench_recurrent_gemm). Every call re-packs
// W_ih [G, C], so a chunk has at least kProjectionRowsPerInput rows per input column: at W2's
// C = 512 that is the whole sequence, where 2048-row chunks made the layer forward 2-5% slower.
constexpr int64_t kProjectionRowsPerInput = 16;
int64_t projection_block(const FusedRnnArgs& a) {
  if (a.gate_slots > 0) return a.gate_slots;
  return steps_holding(std::max(kChunkMinRows, kProjectionRowsPerInput * a.C), a.N, a.T);
}

// Forward steps s0 .. s1-1 (processing order). Entering a block of time steps, its input
// projection x W_ih^T runs as one GEMM into the block's gate rows. h_prev and the LSTM's c_prev
// come from out and extra, so a block can be recomputed on its own (gradient checkpointing),
// with the same GEMM calls and so the same values as the first time.
void forward_steps(const FusedRnnArgs& a, int64_t s0, int64_t s1) {
  const int64_t G = rnn_gates(a.cell) * a.H, N = a.N;
  const int64_t K = projection_block(a);
  const bool bf = a.bf16(), lstm = a.cell == RnnCell::lstm;
  const CpuKernels& k = kernels_of(a);
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t t = time_of(a, s);
    if (s == s0 || time_of(a, s - 1) / K != t / K) {
      const int64_t t0 = t / K * K, rows = (std::min(t0 + K, a.T) - t0) * N;
      float* dst = gates_at(a, t0);
      if (bf) gemm_half(a.half, false, true, rows, G, a.C, a.x_bf + t0 * N * a.C, a.C, a.w_ih_bf, a.C, false, dst, G);
      else gemm(false, true, rows, G, a.C, 1.f, a.x + t0 * N * a.C, a.C, a.w_ih, a.C, 0.f, dst, G);
    }
    // h_prev W_hh^T goes to scratch, and the gate pass adds it: the GRU's n gate needs W_hn
    // h_prev on its own, and for the LSTM an accumulating matmul (a sum post-op) is slower than
    // the extra read in the gate pass (by half at W1's shape: bench_recurrent_gemm, recurrent_acc).
    if (s) {
      const int64_t tp = time_of(a, s - 1);
      const float* h_prev = a.out + tp * N * a.ld_out;
      const uint16_t* hb_prev = bf ? a.h_bf + tp * N * a.H : nullptr;
      if (a.rec) a.rec->run(bf ? static_cast<const void*>(hb_prev) : h_prev, a.scratch);
      else if (bf) gemm_half(a.half, false, true, N, G, a.H, hb_prev, a.H, a.w_hh_bf, a.H, false, a.scratch, G);
      else gemm(false, true, N, G, a.H, 1.f, h_prev, a.ld_out, a.w_hh, a.H, 0.f, a.scratch, G);
    }
    if (lstm) k.lstm_step_forward(a, s);
    else k.gru_step_forward(a, s);
  }
}

}  // namespace

void fused_rnn_forward(const FusedRnnArgs& a) {
  const int64_t G = rnn_gates(a.cell) * a.H;
  const bool bf = a.bf16();
  ST_CHECK(!bf || a.rec || a.w_hh_bf, "fused_rnn_forward: 16-bit mode without a RecurrentGemm needs w_hh_bf");
  const int64_t ld_h = bf ? a.H : a.ld_out;
  if (a.rec && a.T > 1)
    a.rec->prepare(RecurrentGemm::Shape{RecurrentGemm::Op::forward, bf, false, a.N, G, a.H, ld_h, G}, a.w_hh);
  forward_steps(a, 0, a.T);
}

void fused_rnn_backward(const FusedRnnArgs& a, const FusedRnnGrads& g) {
  const int64_t N = a.N, H = a.H, C = a.C, G = rnn_gates(a.cell) * H;
  const int64_t K = g.chunk > 0 ? g.chunk : a.T;  // time steps the gate-gradient buffers hold
  const bool lstm = a.cell == RnnCell::lstm;
  const bool bf = a.bf16();
  ST_CHECK(!bf || (g.dgi_bf && (lstm || g.dgh_bf)), "fused_rnn_backward: 16-bit mode needs dgi_bf/dgh_bf");
  ST_CHECK(bf || !g.dg_step_only, "fused_rnn_backward: fp32 mode needs a chunk of steps in dgi/dgh");
  ST_CHECK(g.bias_partials != nullptr, "fused_rnn_backward: bias_partials workspace missing");
  ST_CHECK(g.wgrad_scratch != nullptr, "fused_rnn_backward: wgrad_scratch workspace missing");
  ST_CHECK(!bf || g.rec || a.w_hh_bf, "fused_rnn_backward: 16-bit mode without a RecurrentGemm needs w_hh_bf");
  ST_CHECK(a.gate_slots == 0 || a.gate_slots == K, "fused_rnn_backward: gate_slots {} must equal the chunk {}",
           a.gate_slots, K);
  ST_CHECK(!g.recompute || a.gate_slots > 0, "fused_rnn_backward: recompute needs gate_slots");
  ST_CHECK(!a.gates_half || bf, "fused_rnn_backward: gates_half needs 16-bit mode");
  ST_CHECK(!g.recompute || !a.gates_half || a.half_slots == K,
           "fused_rnn_backward: recompute with gates_half needs half_slots {} equal to the chunk {}", a.half_slots, K);
  const CpuKernels& k = kernels_of(a);
  std::memset(g.dh, 0, N * H * sizeof(float));
  std::memset(g.dc, 0, N * H * sizeof(float));
  std::memset(g.wgrad_scratch, 0, (C + H) * G * sizeof(float));
  if (g.rec && a.T > 1)
    g.rec->prepare(RecurrentGemm::Shape{RecurrentGemm::Op::backward, bf, !lstm, N, G, H, G, H}, a.w_hh);
  for (int64_t s = a.T; s-- > 0;) {
    const int64_t t = time_of(a, s), slot = t % K;
    // Gradient checkpointing: entering a block of steps, recompute its forward (the gates).
    if (g.recompute && (s == a.T - 1 ? !g.last_block_live : time_of(a, s + 1) / K != t / K)) {
      const int64_t t0 = t / K * K, t1 = std::min(t0 + K, a.T);
      if (a.reverse) forward_steps(a, a.T - t1, a.T - t0);
      else forward_steps(a, t0, t1);
    }
    // Gate gradients go to the chunk's slot of t; in 16-bit mode the fp32 ones are one step's
    // rows that only the bias sums and the 16-bit copies (written row by row) read.
    const int64_t off = g.dg_step_only ? 0 : slot * N * G;
    float* dgi = g.dgi + off;
    float* dgh = g.dgh + off;
    uint16_t* dgi_b = bf ? g.dgi_bf + slot * N * G : nullptr;
    uint16_t* dgh_b = bf && !lstm ? g.dgh_bf + slot * N * G : nullptr;
    if (lstm) k.lstm_step_backward(a, g, s, dgi, dgi_b);
    else k.gru_step_backward(a, g, s, dgi, dgh, dgi_b, dgh_b);
    if (s > 0) {
      // dh_prev = dgates W_hh: the LSTM's replaces dh, the GRU's adds to its direct path.
      const float* dg32 = lstm ? dgi : dgh;
      const uint16_t* dg16 = lstm ? dgi_b : dgh_b;
      if (g.rec) g.rec->run(bf ? static_cast<const void*>(dg16) : dg32, g.dh);
      else if (bf) gemm_half(a.half, false, false, N, H, G, dg16, G, a.w_hh_bf, H, !lstm, g.dh, H);
      else gemm(false, false, N, H, G, 1.f, dg32, G, a.w_hh, H, lstm ? 0.f : 1.f, g.dh, H);
    }
    // The chunk [t0, t1) of t is complete once the next step processed lies outside it.
    if (s == 0 || time_of(a, s - 1) / K != t / K) chunk_gemms(a, g, t / K * K, std::min(t / K * K + K, a.T));
  }
  if (!bf) {
    add_transposed(g.wgrad_scratch, C, G, g.dw_ih);
    add_transposed(g.wgrad_scratch + C * G, H, G, g.dw_hh);
  } else if (C < kHalfTransposedWgradMaxC) {
    add_transposed(g.wgrad_scratch, C, G, g.dw_ih);
  }
}

int64_t fused_rnn_backward_chunk(int64_t N, int64_t T) { return steps_holding(kChunkMinRows, N, T); }

int64_t fused_rnn_bias_partials(int64_t N, RnnCell cell, int64_t H) {
  // GRU blocks hold dgi's G columns and dgh's n part (gru_step_backward).
  return row_blocks(N) * (rnn_gates(cell) * H + (cell == RnnCell::gru ? H : 0));
}

}  // namespace seqtrain
