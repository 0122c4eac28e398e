#include "nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/gemm_fp16.h"
#include "core/rng.h"

namespace seqtrain {
namespace {
// oneDNN gate g reads PyTorch gate kGateFrom[g]. LSTM orders agree (i, f, g, o); oneDNN's GRU
// is (u, r, o) where PyTorch's is (r, z, n), and u = z.
constexpr int kLstmGates[4] = {0, 1, 2, 3};
constexpr int kGruGates[3] = {1, 0, 2};
const int* gate_from(RnnCell c) { return c == RnnCell::lstm ? kLstmGates : kGruGates; }
}  // namespace

static RnnOptions options_with(RnnImpl impl) {
  RnnOptions o;
  o.impl = impl;
  return o;
}

RnnStack::RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
                   int64_t hidden, int64_t layers, bool bidirectional, float dropout, RnnImpl impl)
    : RnnStack(params, prefix, cell, input_size, hidden, layers, bidirectional, dropout, options_with(impl)) {}

RnnStack::RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
                   int64_t hidden, int64_t layers, bool bidirectional, float dropout, const RnnOptions& options)
    : params_(params), cell_(cell), impl_(options.impl), hidden_(hidden), dirs_(bidirectional ? 2 : 1),
      precision_(options.precision), half_(options.precision != RnnPrecision::fp32),
      half_type_(options.precision == RnnPrecision::fp16 ? HalfType::fp16 : HalfType::bf16),
      ckpt_(options.grad_checkpoint), autotune_(options.autotune), tuner_(options.autotuner) {
  ST_CHECK(input_size > 0 && hidden > 0 && layers > 0, "RNN sizes must be positive (input {}, hidden {}, layers {})",
           input_size, hidden, layers);
  ST_CHECK(!(half_ && impl_ == RnnImpl::onednn && !autotune_),
           "{} precision runs on the fused RNN kernels only: use rnn_impl fused (or precision fp32 with onednn)",
           rnn_precision_name(precision_));
  if (autotune_ && !tuner_) tuner_ = std::make_shared<Autotuner>();
  const int64_t G = rnn_gates(cell);
  layers_.resize(layers);
  for (int64_t k = 0; k < layers; ++k) {
    Layer& l = layers_[k];
    l.impl = half_ ? RnnImpl::fused : impl_;
    l.in = k == 0 ? input_size : hidden * dirs_;
    for (int64_t d = 0; d < dirs_; ++d) {
      const std::string sfx = "_l" + std::to_string(k) + (d ? "_reverse" : "");
      l.w_ih.push_back(params.add(prefix + ".weight_ih" + sfx, {G * hidden, l.in}));
      l.w_hh.push_back(params.add(prefix + ".weight_hh" + sfx, {G * hidden, hidden}));
      l.b_ih.push_back(params.add(prefix + ".bias_ih" + sfx, {G * hidden}));
      l.b_hh.push_back(params.add(prefix + ".bias_hh" + sfx, {G * hidden}));
    }
    const int64_t Gb = cell == RnnCell::lstm ? G : rnn_bias_gates(cell);
    l.w_layer.resize(dirs_ * l.in * G * hidden);
    l.w_iter.resize(dirs_ * hidden * G * hidden);
    l.bias.resize(dirs_ * Gb * hidden);
    l.w_layer_t.resize(l.w_layer.size());
    l.w_iter_t.resize(l.w_iter.size());
    l.dbias.resize(l.bias.size());
    l.drop = Dropout(k + 1 < layers ? dropout : 0.f);
  }
}

void RnnStack::init(Rng& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(hidden_));
  for (auto& l : layers_)
    for (int64_t d = 0; d < dirs_; ++d)
      for (size_t idx : {l.w_ih[d], l.w_hh[d], l.b_ih[d], l.b_hh[d]}) {
        Tensor p = params_.param(idx);
        float* v = p.f32();
        for (int64_t i = 0; i < p.numel(); ++i) v[i] = rng.uniform(-bound, bound);
      }
}

// [A, B, C] -> [B, A, C].
static Tensor transpose01(const Tensor& x, Arena& arena) {
  const int64_t A = x.shape[0], B = x.shape[1], C = x.shape[2];
  Tensor y = arena.tensor({B, A, C});
  const float* src = x.f32();
  float* dst = y.f32();
#pragma omp parallel for collapse(2) if (A * B * C > 65536)
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) std::memcpy(dst + (b * A + a) * C, src + (a * B + b) * C, C * sizeof(float));
  return y;
}

RnnPrimitive& RnnStack::primitive(Layer& l, int64_t T, int64_t N, bool training) {
  RnnShape s{cell_, T, N, l.in, hidden_, dirs_, training};
  if (!l.prim || !(l.prim->shape() == s)) {
    l.prim = std::make_unique<RnnPrimitive>(s);
    if (training) {
      l.dw_layer.resize(l.prim->dw_layer_layout().bytes / sizeof(float));
      l.dw_iter.resize(l.prim->dw_iter_layout().bytes / sizeof(float));
    }
  }
  return *l.prim;
}

// PyTorch W [G*H, C] (row g*H+o, column i) -> oneDNN ldigo [C, G, H] per direction.
void RnnStack::pack(Layer& l) {
  const int64_t G = rnn_gates(cell_), H = hidden_;
  const int* from = gate_from(cell_);
  const int64_t Gb = l.bias.size() / (dirs_ * H);
  for (int64_t d = 0; d < dirs_; ++d) {
    auto pack_w = [&](const float* pt, float* dn, int64_t C) {
#pragma omp parallel for collapse(2)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t o = 0; o < H; ++o) {
          const float* row = pt + (from[g] * H + o) * C;
          for (int64_t i = 0; i < C; ++i) dn[(i * G + g) * H + o] = row[i];
        }
    };
    pack_w(params_.param(l.w_ih[d]).f32(), l.w_layer.data() + d * l.in * G * H, l.in);
    pack_w(params_.param(l.w_hh[d]).f32(), l.w_iter.data() + d * H * G * H, H);
    const float* bi = params_.param(l.b_ih[d]).f32();
    const float* bh = params_.param(l.b_hh[d]).f32();
    float* b = l.bias.data() + d * Gb * H;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t o = 0; o < H; ++o) {
        const int64_t src = from[g] * H + o;
        // The GRU's new gate keeps its recurrent bias apart (inside r * (W_hn h + b_hn)).
        b[g * H + o] = (cell_ == RnnCell::gru && g == 2) ? bi[src] : bi[src] + bh[src];
      }
    if (cell_ == RnnCell::gru)
      for (int64_t o = 0; o < H; ++o) b[3 * H + o] = bh[2 * H + o];
  }
}

// PyTorch W [G*H, C] -> ldgoi [G, H, C] per direction: whole gate blocks, reordered.
void RnnStack::pack_backward(Layer& l) {
  const int64_t G = rnn_gates(cell_), H = hidden_;
  const int* from = gate_from(cell_);
  for (int64_t d = 0; d < dirs_; ++d) {
    auto pack_w = [&](const float* pt, float* dn, int64_t C) {
      for (int64_t g = 0; g < G; ++g) std::memcpy(dn + g * H * C, pt + from[g] * H * C, H * C * sizeof(float));
    };
    pack_w(params_.param(l.w_ih[d]).f32(), l.w_layer_t.data() + d * l.in * G * H, l.in);
    pack_w(params_.param(l.w_hh[d]).f32(), l.w_iter_t.data() + d * H * G * H, H);
  }
}

void RnnStack::unpack_grads(Layer& l) {
  const int64_t G = rnn_gates(cell_), H = hidden_;
  const int* from = gate_from(cell_);
  const int64_t Gb = l.bias.size() / (dirs_ * H);
  for (int64_t d = 0; d < dirs_; ++d) {
    auto unpack_w = [&](const float* dn, const WeightLayout& lay, float* pt, int64_t C) {
      dn += d * lay.sd;
#pragma omp parallel for collapse(2)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t o = 0; o < H; ++o) {
          float* row = pt + (from[g] * H + o) * C;
          for (int64_t i = 0; i < C; ++i) row[i] += dn[i * lay.si + g * lay.sg + o];
        }
    };
    unpack_w(l.dw_layer.data(), l.prim->dw_layer_layout(), params_.grad(l.w_ih[d]).f32(), l.in);
    unpack_w(l.dw_iter.data(), l.prim->dw_iter_layout(), params_.grad(l.w_hh[d]).f32(), H);
    float* gi = params_.grad(l.b_ih[d]).f32();
    float* gh = params_.grad(l.b_hh[d]).f32();
    const float* db = l.dbias.data() + d * Gb * H;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t o = 0; o < H; ++o) {
        const int64_t dst = from[g] * H + o;
        gi[dst] += db[g * H + o];
        if (!(cell_ == RnnCell::gru && g == 2)) gh[dst] += db[g * H + o];
      }
    if (cell_ == RnnCell::gru)
      for (int64_t o = 0; o < H; ++o) gh[2 * H + o] += db[3 * H + o];
  }
}

RnnImpl parse_rnn_impl(const std::string& name) {
  if (name == "fused") return RnnImpl::fused;
  if (name == "onednn") return RnnImpl::onednn;
  fail("RNN implementation '{}' is not known: use fused or onednn", name);
}

const char* rnn_impl_name(RnnImpl impl) { return impl == RnnImpl::fused ? "fused" : "onednn"; }

Isa RnnStack::layer_isa(size_t k) const {
  const Layer& l = layers_.at(k);
  return l.kernels ? l.kernels->isa : active_isa();
}

const char* rnn_precision_name(RnnPrecision p) {
  return p == RnnPrecision::bf16 ? "bf16" : p == RnnPrecision::fp16 ? "fp16" : "fp32";
}

RnnPrecision rnn_precision(const std::string& precision, std::string* why) {
  auto say = [&](const std::string& w) { if (why) *why = w; };
  if (precision == "fp32") { say("precision fp32: as configured"); return RnnPrecision::fp32; }
  if (precision == "bf16") {
    ST_CHECK(cpu_has_native_bf16(),
             "precision bf16 needs a CPU with AVX512-BF16, which this one lacks: use precision fp32 (or auto)");
    say("precision bf16: as configured (CPU has native bf16)");
    return RnnPrecision::bf16;
  }
  if (precision == "fp16") {
    say(std::string("precision fp16: as configured, with dynamic loss scaling; fp16 is emulated on this CPU "
                    "(oneDNN has no fp16 matmul without AVX512-FP16): fp16's numerics, not its speed, slower than "
                    "fp32 here") +
        (cpu_has_native_bf16() ? "; bf16 is the fast choice on this CPU" : ""));
    return RnnPrecision::fp16;
  }
  if (precision == "auto") {
    const bool bf = cpu_has_native_bf16();
    say(bf ? "precision auto -> bf16: the CPU has native bf16 dot products (AVX512-BF16)"
           : "precision auto -> fp32: the CPU has no native bf16 (AVX512-BF16)");
    return bf ? RnnPrecision::bf16 : RnnPrecision::fp32;
  }
  fail("precision '{}' is not known: use fp32, bf16, fp16 or auto", precision);
}

void RnnStack::convert_weights_half(Layer& l) {
  const int64_t GH = rnn_gates(cell_) * hidden_;
  l.w_ih_bf.resize(dirs_ * GH * l.in);
  // bf16 needs no copy of W_hh: the layer's RecurrentGemms round it to bf16 while packing it.
  // fp16 has no packed path (its GEMM is emulated), so it keeps a rounded copy.
  const bool copy_hh = !packed_forward() || half_type_ == HalfType::fp16;
  l.w_hh_bf.resize(copy_hh ? dirs_ * GH * hidden_ : 0);
  for (int64_t d = 0; d < dirs_; ++d) {
    f32_to_half(half_type_, params_.param(l.w_ih[d]).f32(), l.w_ih_bf.data() + d * GH * l.in, GH * l.in);
    if (copy_hh)
      f32_to_half(half_type_, params_.param(l.w_hh[d]).f32(), l.w_hh_bf.data() + d * GH * hidden_, GH * hidden_);
  }
}

void RnnStack::forward_onednn(Layer& l, const Tensor& in, Arena& arena, bool training) {
  const int64_t T = in.shape[0], N = in.shape[1];
  RnnPrimitive& prim = primitive(l, T, N, training);
  pack(l);
  l.workspace = training ? arena.alloc(prim.workspace_bytes()) : nullptr;
  prim.forward(in.f32(), l.w_layer.data(), l.w_iter.data(), l.bias.data(), l.dst.f32(), l.workspace);
}

Tensor RnnStack::backward_onednn(Layer& l, const Tensor& dy, Arena& arena) {
  Tensor dsrc = arena.tensor(l.src.shape);
  pack_backward(l);
  l.prim->backward(l.src.f32(), l.dst.f32(), dy.f32(), dsrc.f32(), l.w_layer_t.data(), l.w_iter_t.data(),
                   l.bias.data(), l.dw_layer.data(), l.dw_iter.data(), l.dbias.data(), l.workspace);
  unpack_grads(l);
  return dsrc;
}

// The gate blocks of a layer's fused pass (null where the whole sequence is saved instead):
// under checkpointing the saved gates (16-bit or fp32), and in 16-bit mode the fp32 working
// block. Forward and backward take them in the same order from a freshly reset ckpt_arena_,
// so the backward finds the forward's last block at the same address.
RnnStack::GateBlocks RnnStack::gate_blocks(int64_t N, int64_t T, Arena& arena, bool ckpt) const {
  const int64_t block = fused_rnn_backward_chunk(N, T), G = rnn_gates(cell_) * hidden_;
  GateBlocks b;
  if (ckpt && half_) b.half = static_cast<uint16_t*>(arena.alloc(block * N * G * sizeof(uint16_t)));
  if (ckpt || half_) b.f32 = arena.tensor({block, N, G}).f32();
  b.steps = block;
  return b;
}

// Saved state (gates, cell state, 16-bit copies) comes from the step's arena. Under gradient
// checkpointing (ckpt) the gates are not kept: they go to a block of fused_rnn_backward_chunk()
// steps in the private ckpt_arena_, reused block after block, and the backward recomputes
// each block just before its turn (FusedRnnGrads::recompute). In 16-bit mode the gates are
// saved in 16 bits (FusedRnnArgs::gates_half) and the fp32 gates are only a working block.
void RnnStack::forward_fused(Layer& l, const Tensor& in, Arena& keep, bool ckpt) {
  const int64_t T = in.shape[0], N = in.shape[1], G = rnn_gates(cell_) * hidden_;
  const GateBlocks blocks = gate_blocks(N, T, ckpt ? ckpt_arena_ : keep, ckpt);
  uint16_t* x_bf = nullptr;
  if (half_) {
    x_bf = static_cast<uint16_t*>(keep.alloc(T * N * l.in * sizeof(uint16_t)));
    f32_to_half_rows(half_type_, in.f32(), l.in, x_bf, T * N, l.in);
  }
  l.fused.resize(dirs_);
  l.rec_fwd.resize(dirs_);
  for (int64_t d = 0; d < dirs_; ++d) {
    FusedRnnArgs& a = l.fused[d];
    a = FusedRnnArgs{};
    a.cell = cell_;
    a.reverse = d == 1;
    a.T = T; a.N = N; a.C = l.in; a.H = hidden_;
    a.w_ih = params_.param(l.w_ih[d]).f32();
    a.w_hh = params_.param(l.w_hh[d]).f32();
    a.b_ih = params_.param(l.b_ih[d]).f32();
    a.b_hh = params_.param(l.b_hh[d]).f32();
    a.x = in.f32();
    a.kernels = l.kernels;
    a.out = l.dst.f32() + d * hidden_;
    a.ld_out = hidden_ * dirs_;
    a.gates = blocks.f32 ? blocks.f32 : keep.tensor({T, N, G}).f32();
    a.gate_slots = blocks.f32 ? blocks.steps : 0;
    if (half_) {
      a.gates_half = blocks.half ? blocks.half : static_cast<uint16_t*>(keep.alloc(T * N * G * sizeof(uint16_t)));
      a.half_slots = blocks.half ? blocks.steps : 0;
    }
    a.extra = keep.tensor({T, N, hidden_}).f32();
    a.scratch = keep.tensor({N, G}).f32();
    // The packed per-step GEMM serves fp32 and bf16; fp16's emulated GEMM goes through gemm_half.
    a.rec = packed_forward() ? &l.rec_fwd[d] : nullptr;
    if (half_) {
      a.w_ih_bf = l.w_ih_bf.data() + d * G * l.in;
      if (!l.w_hh_bf.empty()) a.w_hh_bf = l.w_hh_bf.data() + d * G * hidden_;
      a.x_bf = x_bf;
      a.half = half_type_;
      a.h_bf = static_cast<uint16_t*>(keep.alloc(T * N * hidden_ * sizeof(uint16_t)));
    }
    fused_rnn_forward(a);
  }
}

Tensor RnnStack::backward_fused(Layer& l, const Tensor& dy, Arena& arena, bool want_dx) {
  const int64_t T = l.src.shape[0], N = l.src.shape[1], G = rnn_gates(cell_) * hidden_;
  const bool gru = cell_ == RnnCell::gru;
  Tensor dsrc = want_dx ? arena.tensor(l.src.shape) : Tensor();
  // Under checkpointing the backward recomputes the gates block by block into a block buffer
  // of the private arena, and takes its workspace from there too.
  const int64_t chunk = fused_rnn_backward_chunk(N, T);
  // The layer whose forward ran last (the top one) left its last block of gates in the buffer;
  // when the buffer lands at the same address again (and one direction wrote nothing over it),
  // that block needs no recompute.
  bool last_block_live = false;
  if (ckpt_) {
    ckpt_arena_.reset();
    const GateBlocks blocks = gate_blocks(N, T, ckpt_arena_, true);
    last_block_live = ckpt_live_ == &l && dirs_ == 1 && l.fused[0].gates == blocks.f32 &&
                      l.fused[0].gates_half == blocks.half;
    for (auto& a : l.fused) {
      a.gates = blocks.f32;
      a.gates_half = blocks.half;
    }
  }
  ckpt_live_ = nullptr;
  Arena& work = ckpt_ ? ckpt_arena_ : arena;
  // The gate gradients are kept for one chunk of steps (the backward runs the whole-sequence
  // GEMMs chunk by chunk); in 16-bit mode the GEMMs read the 16-bit copies, so the fp32 ones
  // are kept for one step only.
  const int64_t dg_steps = half_ ? 1 : chunk;
  Tensor dgi = work.tensor({dg_steps, N, G});
  Tensor dgh = gru ? work.tensor({dg_steps, N, G}) : dgi;
  Tensor partials = work.tensor({fused_rnn_bias_partials(N, cell_, hidden_)});
  Tensor wgrad_scratch = work.tensor({G * (l.in + hidden_)});
  Tensor dh = work.tensor({N, hidden_}), dc = work.tensor({N, hidden_});
  uint16_t* dgi_bf = nullptr;
  uint16_t* dgh_bf = nullptr;
  if (half_) {
    dgi_bf = static_cast<uint16_t*>(work.alloc(chunk * N * G * sizeof(uint16_t)));
    if (gru) dgh_bf = static_cast<uint16_t*>(work.alloc(chunk * N * G * sizeof(uint16_t)));
  }
  l.rec_bwd.resize(dirs_);
  for (int64_t d = 0; d < dirs_; ++d) {
    FusedRnnGrads g;
    g.rec = half_ && half_type_ == HalfType::fp16 ? nullptr : &l.rec_bwd[d];
    g.dout = dy.f32() + d * hidden_;
    g.dx = want_dx ? dsrc.f32() : nullptr;
    g.accumulate_dx = d > 0;
    g.dw_ih = params_.grad(l.w_ih[d]).f32();
    g.dw_hh = params_.grad(l.w_hh[d]).f32();
    g.db_ih = params_.grad(l.b_ih[d]).f32();
    g.db_hh = params_.grad(l.b_hh[d]).f32();
    g.chunk = chunk;
    g.recompute = ckpt_;
    g.last_block_live = last_block_live;
    g.dgi = dgi.f32();
    g.dgh = gru ? dgh.f32() : g.dgi;
    g.dg_step_only = half_;
    g.bias_partials = partials.f32();
    g.wgrad_scratch = wgrad_scratch.f32();
    g.dh = dh.f32(); g.dc = dc.f32();
    g.dgi_bf = dgi_bf; g.dgh_bf = dgh_bf;
    fused_rnn_backward(l.fused[d], g);
  }
  return dsrc;
}

void RnnStack::layer_forward(Layer& l, const Tensor& in, Arena& arena, bool training) {
  if (l.impl == RnnImpl::fused) {
    if (ckpt_ && training) ckpt_arena_.reset();
    forward_fused(l, in, arena, ckpt_ && training);
    if (ckpt_ && training) ckpt_live_ = &l;
  } else {
    forward_onednn(l, in, arena, training);
  }
}

Tensor RnnStack::layer_backward(Layer& l, const Tensor& dy, Arena& arena, bool want_dx) {
  return l.impl == RnnImpl::fused ? backward_fused(l, dy, arena, want_dx) : backward_onednn(l, dy, arena);
}

// Times one training forward + backward of this layer with each implementation (in a private
// arena, gradients restored afterwards) and keeps the faster for the layer. Candidates are timed
// on the first kTuneSteps time steps only: they differ in the per-step work, which a prefix
// measures as well as the whole sequence at a fraction of the cost (issue 13 bounds the tuner at
// 2% of a quickstart).
void RnnStack::autotune_layer(Layer& l, const Tensor& full_in) {
  constexpr int64_t kTuneSteps = 16;
  const int64_t T = full_in.shape[0], N = full_in.shape[1];
  const Tensor in = full_in.slice0(0, std::min(T, kTuneSteps));
  const int64_t Tt = in.shape[0];
  const std::string key = fmt::format("{} T={} N={} C={} H={} D={} {}{}", cell_ == RnnCell::lstm ? "lstm" : "gru", T,
                                      N, l.in, hidden_, dirs_, rnn_precision_name(precision_), ckpt_ ? " ckpt" : "");
  std::vector<float> saved(params_.grads(), params_.grads() + params_.size());
  Arena tune_arena;
  auto run = [&](RnnImpl impl) {
    tune_arena.reset();
    l.impl = impl;
    l.src = in;
    l.dst = tune_arena.tensor({Tt, N, hidden_ * dirs_});
    layer_forward(l, in, tune_arena, true);
    Tensor dy = tune_arena.tensor({Tt, N, hidden_ * dirs_});
    std::fill(dy.f32(), dy.f32() + dy.numel(), 1e-3f);
    layer_backward(l, dy, tune_arena, true);
  };
  auto fused_at = [&](const CpuKernels* k) {
    l.kernels = k;
    run(RnnImpl::fused);
  };
  std::vector<TuneCandidate> cands{{"fused", [&] { fused_at(nullptr); }}};
  if (active_isa() > Isa::avx2) cands.push_back({"fused:avx2", [&] { fused_at(&cpu_kernels(Isa::avx2)); }});
  if (!half_) cands.push_back({"onednn", [&] { run(RnnImpl::onednn); }});
  // Warm-ups size the arena (overflowing into chunks a reset merges into fresh memory): touch it
  // once before timing so no candidate pays page faults the others do not.
  const std::string choice = tuner_->choose(key, cands, [&] { tune_arena.prefault(); });
  std::copy(saved.begin(), saved.end(), params_.grads());
  // "fused" is the active level, "fused:<level>" a lower one, "onednn" the primitive.
  const auto colon = choice.find(':');
  l.impl = parse_rnn_impl(choice.substr(0, colon));
  l.kernels = colon == std::string::npos ? nullptr : &cpu_kernels(parse_isa(choice.substr(colon + 1), "autotune choice"));
  l.tuned_T = T;
  l.tuned_N = N;
}

Tensor RnnStack::forward(const Tensor& x, Arena& arena, bool training, uint64_t seed) {
  ST_CHECK(x.shape.size() == 3 && x.shape[2] == layers_[0].in,
           "RNN input must be [batch, time, {}], got {}", layers_[0].in, shape_str(x.shape));
  const int64_t N = x.shape[0], T = x.shape[1];
  // Both implementations work time-major (and oneDNN 2.6's backward mishandles batch-first
  // input), so the batch is transposed once here.
  Tensor in = transpose01(x, arena);
  for (size_t k = 0; k < layers_.size(); ++k) {
    Layer& l = layers_[k];
    if (half_) convert_weights_half(l);  // once per step; backward reuses the copies
    // A smaller batch of a tuned length (an epoch's short last batch) keeps the full batch's
    // choice: it runs once an epoch, and timing it cost as much as it could save.
    const bool tuned = l.tuned_T == T && N <= l.tuned_N;
    if (autotune_ && training && !tuned) autotune_layer(l, in);
    l.src = in;
    l.dst = arena.tensor({T, N, hidden_ * dirs_});
    layer_forward(l, in, arena, training);
    in = l.drop.forward(l.dst, arena, training, mix_seed(seed, k));
  }
  return in;
}

Tensor RnnStack::backward(const Tensor& dy, Arena& arena, bool want_dx) {
  Tensor d = dy;
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& l = layers_[k];
    d = l.drop.backward(d, arena);
    // The first layer's input gradient is only computed when the caller wants it (the
    // forecaster does not: its input is data).
    d = layer_backward(l, d, arena, k > 0 || want_dx);
  }
  return want_dx ? transpose01(d, arena) : Tensor();
}

}  // namespace seqtrain
