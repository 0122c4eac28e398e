// The gate passes of the fused LSTM / GRU kernels (rnn_fused.h): per time step, the elementwise
// work between the GEMMs (activations and state update forward; gate gradients, the carried
// state gradients and the bias-gradient sums backward), over whole rows in this level's vectors.
// rnn_fused.cpp runs the GEMMs and calls these through cpu_kernels().
#include <cstring>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"
#include "backend/cpu/rnn_fused_layout.h"

namespace seqtrain::ST_ISA_NS {

using namespace rnn_fused_layout;

// A padded row (past its length) of a forward step: zero output and saved state, which is the
// state the reverse direction starts from at the row's last valid step; the forward direction's
// final state stays at that step's output. Its 16-bit copy of h (the next GEMM's input) too.
static void zero_padded_row(const FusedRnnArgs& a, int64_t t, int64_t n, float* h, float* state) {
  std::memset(h, 0, a.H * sizeof(float));
  std::memset(state, 0, a.H * sizeof(float));
  if (a.h_bf) std::memset(a.h_bf + (t * a.N + n) * a.H, 0, a.H * sizeof(uint16_t));
}

void lstm_step_forward(const FusedRnnArgs& a, int64_t s) {
  const int64_t t = time_of(a, s), N = a.N, H = a.H, G4 = 4 * H;
  float* g = gates_at(a, t);  // holds x W_ih^T, becomes activated gates
  uint16_t* gates16 = a.gates_half ? half_gates_at(a, t) : nullptr;
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
    if (padded(a, t, n)) {
      zero_padded_row(a, t, n, hn, cn);
      continue;
    }
    for_lanes(H, [&](auto l) {
      // Gate k's pre-activation: input projection, recurrent projection (none at the first
      // step), both biases.
      auto pre = [&](int64_t k) {
        vf v = l.load(gn + k * H);
        if (cp) v += l.load(ghn + k * H);
        return v + l.load(a.b_ih + k * H) + l.load(a.b_hh + k * H);
      };
      const vf i = sigmoid(pre(0)), f = sigmoid(pre(1)), gg = tanh(pre(2)), o = sigmoid(pre(3));
      const vf cv = (cp ? f * l.load(cp) : splat(0.f)) + i * gg;
      l.store(gn, i);
      l.store(gn + H, f);
      l.store(gn + 2 * H, gg);
      l.store(gn + 3 * H, o);
      l.store(cn, cv);
      l.store(hn, o * tanh(cv));
    });
    // The 16-bit copies are made while the rows are in cache.
    if (a.h_bf) ST_ISA_NS::f32_to_half(a.half, hn, a.h_bf + (t * N + n) * H, H);
    if (a.gates_half) ST_ISA_NS::f32_to_half(a.half, gn, gates16 + n * G4, G4);
  }
}

void gru_step_forward(const FusedRnnArgs& a, int64_t s) {
  const int64_t t = time_of(a, s), N = a.N, H = a.H, G3 = 3 * H;
  float* g = gates_at(a, t);   // holds x W_ih^T, becomes r, z, n
  uint16_t* gates16 = a.gates_half ? half_gates_at(a, t) : nullptr;
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
    if (padded(a, t, n)) {
      zero_padded_row(a, t, n, hn, en);
      continue;
    }
    for_lanes(H, [&](auto l) {
      // h_prev W_hh^T of gate k (zero at the first step).
      auto rec = [&](int64_t k) { return hp ? l.load(ghr + k * H) : splat(0.f); };
      const vf r = sigmoid(l.load(gn) + l.load(a.b_ih) + rec(0) + l.load(a.b_hh));
      const vf z = sigmoid(l.load(gn + H) + l.load(a.b_ih + H) + rec(1) + l.load(a.b_hh + H));
      const vf e = rec(2) + l.load(a.b_hh + 2 * H);
      const vf nv = tanh(l.load(gn + 2 * H) + l.load(a.b_ih + 2 * H) + r * e);
      l.store(gn, r);
      l.store(gn + H, z);
      l.store(gn + 2 * H, nv);
      l.store(en, e);
      l.store(hn, (1.f - z) * nv + z * (hp ? l.load(hp) : splat(0.f)));
    });
    if (a.h_bf) ST_ISA_NS::f32_to_half(a.half, hn, a.h_bf + (t * N + n) * H, H);
    if (a.gates_half) ST_ISA_NS::f32_to_half(a.half, gn, gates16 + n * G3, G3);
  }
}

// out[j] += the sum of partials[b * ld + j] over the blocks b, in block order, j < w.
static void add_partials(const float* partials, int64_t blocks, int64_t ld, int64_t w, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* p = partials + b * ld;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) out[j] += p[j];
  }
}

// The gates a step saved for backward: fp32, or their 16-bit copies (gates_half).
struct SavedGates {
  const float* f32;
  const uint16_t* half;
};

static SavedGates saved_gates(const FusedRnnArgs& a, int64_t t) {
  if (a.gates_half) return {nullptr, half_gates_at(a, t)};
  return {gates_at(a, t), nullptr};
}

// Row n's G saved gates as fp32: in place, or 16-bit copies widened into `row`, the row of the
// gate gradients it is about to become (each lane reads its gates before it writes there).
static const float* gate_row(const FusedRnnArgs& a, const SavedGates& sg, int64_t n, int64_t G, float* row) {
  if (!sg.half) return sg.f32 + n * G;
  ST_ISA_NS::half_to_f32(a.half, sg.half + n * G, row, G);
  return row;
}

// What both cells' backward step reads at step s: its time index, the saved gates, the output
// gradient rows dout [N, ld] and the cell's extra saved state [N, H] (the LSTM's c, the GRU's
// W_hn h + b_hn) at that time.
struct StepSaved {
  int64_t t;
  SavedGates gates;
  const float* dout;
  const float* extra;
};

static StepSaved step_saved(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s) {
  const int64_t t = time_of(a, s);
  return {t, saved_gates(a, t), g.dout + t * a.N * a.ld_out, a.extra + t * a.N * a.H};
}

// A padded row's gate gradients, fp32 and (when kept) 16-bit: zero, so the GEMMs that read
// them add nothing to dW, dx or the carried dh, whatever x and dy hold there.
static void zero_gate_grads(const FusedRnnArgs& a, int64_t n, float* d, uint16_t* d16) {
  const int64_t G = rnn_gates(a.cell) * a.H;
  std::memset(d, 0, G * sizeof(float));
  if (d16) std::memset(d16 + n * G, 0, G * sizeof(uint16_t));
}

// row(n, acc) for every batch row: the rows go in blocks of kRowBlock over the threads, and acc
// is the block's own zeroed row of width w in bias_partials, into which row() adds its rows'
// bias-gradient terms (add_partials then sums the blocks in order: the same sums for any
// thread count).
template <class Row>
static void for_row_blocks(const FusedRnnGrads& g, int64_t N, int64_t H, int64_t w, Row&& row) {
#pragma omp parallel for if (worth_threads(N * H))
  for (int64_t b = 0; b < row_blocks(N); ++b) {
    float* acc = g.bias_partials + b * w;
    for (int64_t j = 0; j < w; ++j) acc[j] = 0.f;
    for (int64_t n = b * kRowBlock; n < imin(N, (b + 1) * kRowBlock); ++n) row(n, acc);
  }
}

// Backward of one LSTM step: gate gradients (fp32 into dgi, 16-bit copies into dgi_b), the
// carried dc and the direct part of dh, and the blocks' bias-gradient sums.
void lstm_step_backward(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, uint16_t* dgi_b) {
  const int64_t N = a.N, H = a.H, G = 4 * H, ld = a.ld_out;
  const StepSaved st = step_saved(a, g, s);
  const float* c_prev = s ? a.extra + time_of(a, s - 1) * N * H : nullptr;
  for_row_blocks(g, N, H, G, [&](int64_t n, float* acc) {
    float* d = dgi + n * G;
    if (padded(a, st.t, n)) {  // no gradient in, none out: zero gate gradients and carried dc
      zero_gate_grads(a, n, d, dgi_b);
      std::memset(g.dc + n * H, 0, H * sizeof(float));
      return;
    }
    const float* gn = gate_row(a, st.gates, n, G, d);
    float* dhn = g.dh + n * H;
    float* dcn = g.dc + n * H;
    const float* cn = st.extra + n * H;
    const float* cpn = c_prev ? c_prev + n * H : nullptr;
    const float* doutn = st.dout + n * ld;
    for_lanes(H, [&](auto l) {
      const vf i = l.load(gn), f = l.load(gn + H), gg = l.load(gn + 2 * H), o = l.load(gn + 3 * H);
      const vf tc = tanh(l.load(cn));
      const vf dh = l.load(doutn) + l.load(dhn);
      const vf dcv = l.load(dcn) + dh * o * (1.f - tc * tc);
      const vf cp = cpn ? l.load(cpn) : splat(0.f);
      const vf di = dcv * gg * i * (1.f - i), df = dcv * cp * f * (1.f - f);
      const vf dg = dcv * i * (1.f - gg * gg), dov = dh * tc * o * (1.f - o);
      l.store(d, di);
      l.store(d + H, df);
      l.store(d + 2 * H, dg);
      l.store(d + 3 * H, dov);
      l.store(acc, l.load(acc) + di);
      l.store(acc + H, l.load(acc + H) + df);
      l.store(acc + 2 * H, l.load(acc + 2 * H) + dg);
      l.store(acc + 3 * H, l.load(acc + 3 * H) + dov);
      l.store(dcn, dcv * f);
    });
    if (dgi_b) ST_ISA_NS::f32_to_half(a.half, d, dgi_b + n * G, G);
  });
  add_partials(g.bias_partials, row_blocks(N), G, G, g.db_ih);
  add_partials(g.bias_partials, row_blocks(N), G, G, g.db_hh);  // the LSTM's two biases get equal gradients
}

// Backward of one GRU step: input-side gate gradients dgi (r, z, n), recurrent-side dgh (the
// same r and z, n times r), their 16-bit copies, dh's direct path, and the bias sums: per block
// G columns for dgi and H more for dgh's n part (its r and z parts equal dgi's).
void gru_step_backward(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, float* dgh,
                       uint16_t* dgi_b, uint16_t* dgh_b) {
  const int64_t N = a.N, H = a.H, G = 3 * H, ld = a.ld_out, W = G + H;
  const StepSaved st = step_saved(a, g, s);
  const float* h_prev = s ? a.out + time_of(a, s - 1) * N * ld : nullptr;
  for_row_blocks(g, N, H, W, [&](int64_t n, float* acc) {
    float* di = dgi + n * G;
    float* dr = dgh + n * G;
    if (padded(a, st.t, n)) {  // no gradient in, none out: zero gate gradients and direct dh path
      zero_gate_grads(a, n, di, dgi_b);
      zero_gate_grads(a, n, dr, dgh_b);
      std::memset(g.dh + n * H, 0, H * sizeof(float));
      return;
    }
    const float* gn = gate_row(a, st.gates, n, G, di);
    float* dhn = g.dh + n * H;
    const float* hpn = h_prev ? h_prev + n * ld : nullptr;
    const float* doutn = st.dout + n * ld;
    const float* en = st.extra + n * H;
    for_lanes(H, [&](auto l) {
      const vf r = l.load(gn), z = l.load(gn + H), nv = l.load(gn + 2 * H);
      const vf hp = hpn ? l.load(hpn) : splat(0.f);
      const vf dh = l.load(doutn) + l.load(dhn);
      const vf dn = dh * (1.f - z) * (1.f - nv * nv);
      const vf dz = dh * (hp - nv) * z * (1.f - z);
      const vf drr = dn * l.load(en) * r * (1.f - r);
      l.store(di, drr);
      l.store(di + H, dz);
      l.store(di + 2 * H, dn);
      l.store(dr, drr);
      l.store(dr + H, dz);
      l.store(dr + 2 * H, dn * r);
      l.store(acc, l.load(acc) + drr);
      l.store(acc + H, l.load(acc + H) + dz);
      l.store(acc + 2 * H, l.load(acc + 2 * H) + dn);
      l.store(acc + G, l.load(acc + G) + dn * r);
      l.store(dhn, dh * z);  // the direct path; the gate paths are added by the recurrent GEMM
    });
    if (dgi_b) {
      ST_ISA_NS::f32_to_half(a.half, di, dgi_b + n * G, G);
      ST_ISA_NS::f32_to_half(a.half, dr, dgh_b + n * G, G);
    }
  });
  add_partials(g.bias_partials, row_blocks(N), W, G, g.db_ih);
  add_partials(g.bias_partials, row_blocks(N), W, 2 * H, g.db_hh);
  add_partials(g.bias_partials + G, row_blocks(N), W, H, g.db_hh + 2 * H);
}

void gate_fn(GateFn fn, const float* x, float* y, int64_t n) {
  for_lanes(n, [&](auto l) {
    const vf v = l.load(x);
    l.store(y, fn == GateFn::exp ? exp(v) : fn == GateFn::sigmoid ? sigmoid(v) : tanh(v));
  });
}

}  // namespace seqtrain::ST_ISA_NS
