#include "backend/cpu/cpu_rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/gemm_fp16.h"

namespace seqtrain {
namespace {
// oneDNN gate g reads PyTorch gate kGateFrom[g]. LSTM orders agree (i, f, g, o); oneDNN's GRU
// is (u, r, o) where PyTorch's is (r, z, n), and u = z.
constexpr int kLstmGates[4] = {0, 1, 2, 3};
constexpr int kGruGates[3] = {1, 0, 2};
const int* gate_from(RnnCell c) { return c == RnnCell::lstm ? kLstmGates : kGruGates; }
}  // namespace

RnnImpl parse_rnn_impl(const std::string& name) {
  if (name == "fused") return RnnImpl::fused;
  if (name == "onednn") return RnnImpl::onednn;
  fail("RNN implementation '{}' is not known: use fused or onednn", name);
}

const char* rnn_impl_name(RnnImpl impl) { return impl == RnnImpl::fused ? "fused" : "onednn"; }

CpuRecurrentLayers::CpuRecurrentLayers(const RecurrentSpec& spec)
    : cell_(spec.cell), impl_(parse_rnn_impl(spec.options.impl)), hidden_(spec.hidden), dirs_(spec.dirs),
      precision_(spec.options.precision), half_(spec.options.precision.mixed()),
      half_type_(spec.options.precision.compute == DType::f16 ? HalfType::fp16 : HalfType::bf16),
      packed_f32_(active_isa() >= Isa::avx512 || spec.cell == RnnCell::gru), ckpt_(spec.options.grad_checkpoint),
      autotune_(spec.options.autotune), tuner_(spec.options.autotuner) {
  ST_CHECK(!(half_ && impl_ == RnnImpl::onednn && !autotune_),
           "{} precision runs on the fused RNN kernels only: use rnn_impl fused (or precision fp32 with onednn)",
           precision_name(precision_));
  if (autotune_ && !tuner_) tuner_ = std::make_shared<Autotuner>();
  const int64_t G = rnn_gates(cell_), hidden = hidden_;
  layers_.resize(spec.inputs.size());
  for (size_t k = 0; k < layers_.size(); ++k) {
    Layer& l = layers_[k];
    l.impl = half_ ? RnnImpl::fused : impl_;
    l.in = spec.inputs[k];
    const int64_t Gb = cell_ == RnnCell::lstm ? G : rnn_bias_gates(cell_);
    l.w_layer.resize(dirs_ * l.in * G * hidden);
    l.w_iter.resize(dirs_ * hidden * G * hidden);
    l.bias.resize(dirs_ * Gb * hidden);
    l.w_layer_t.resize(l.w_layer.size());
    l.w_iter_t.resize(l.w_iter.size());
    l.dbias.resize(l.bias.size());
  }
}

RnnPrimitive& CpuRecurrentLayers::primitive(Layer& l, int64_t T, int64_t N, bool training) {
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
void CpuRecurrentLayers::pack(Layer& l, const RecurrentWeights& w) {
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
    pack_w(w.w_ih[d], l.w_layer.data() + d * l.in * G * H, l.in);
    pack_w(w.w_hh[d], l.w_iter.data() + d * H * G * H, H);
    const float* bi = w.b_ih[d];
    const float* bh = w.b_hh[d];
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
void CpuRecurrentLayers::pack_backward(Layer& l, const RecurrentWeights& w) {
  const int64_t G = rnn_gates(cell_), H = hidden_;
  const int* from = gate_from(cell_);
  for (int64_t d = 0; d < dirs_; ++d) {
    auto pack_w = [&](const float* pt, float* dn, int64_t C) {
      for (int64_t g = 0; g < G; ++g) std::memcpy(dn + g * H * C, pt + from[g] * H * C, H * C * sizeof(float));
    };
    pack_w(w.w_ih[d], l.w_layer_t.data() + d * l.in * G * H, l.in);
    pack_w(w.w_hh[d], l.w_iter_t.data() + d * H * G * H, H);
  }
}

void CpuRecurrentLayers::unpack_grads(Layer& l, const RecurrentWeights& w) {
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
    unpack_w(l.dw_layer.data(), l.prim->dw_layer_layout(), w.dw_ih[d], l.in);
    unpack_w(l.dw_iter.data(), l.prim->dw_iter_layout(), w.dw_hh[d], H);
    float* gi = w.db_ih[d];
    float* gh = w.db_hh[d];
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

Isa CpuRecurrentLayers::layer_isa(size_t k) const {
  const Layer& l = layers_.at(k);
  return l.kernels ? l.kernels->isa : active_isa();
}

void CpuRecurrentLayers::convert_weights_half(Layer& l, const RecurrentWeights& w) {
  const int64_t GH = rnn_gates(cell_) * hidden_;
  l.w_ih_bf.resize(dirs_ * GH * l.in);
  // bf16 needs no copy of W_hh: the layer's RecurrentGemms round it to bf16 while packing it.
  // fp16 has no packed path (its GEMM is emulated), so it keeps a rounded copy.
  const bool copy_hh = !packed_forward() || half_type_ == HalfType::fp16;
  l.w_hh_bf.resize(copy_hh ? dirs_ * GH * hidden_ : 0);
  for (int64_t d = 0; d < dirs_; ++d) {
    f32_to_half(half_type_, w.w_ih[d], l.w_ih_bf.data() + d * GH * l.in, GH * l.in);
    if (copy_hh)
      f32_to_half(half_type_, w.w_hh[d], l.w_hh_bf.data() + d * GH * hidden_, GH * hidden_);
  }
}

void CpuRecurrentLayers::forward_onednn(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& arena, bool training) {
  const int64_t T = in.shape[0], N = in.shape[1];
  RnnPrimitive& prim = primitive(l, T, N, training);
  pack(l, w);
  l.workspace = training ? arena.alloc(prim.workspace_bytes()) : nullptr;
  prim.forward(in.f32(), l.w_layer.data(), l.w_iter.data(), l.bias.data(), l.dst.f32(), l.workspace);
}

Tensor CpuRecurrentLayers::backward_onednn(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena) {
  Tensor dsrc = arena.tensor(l.src.shape);
  pack_backward(l, w);
  l.prim->backward(l.src.f32(), l.dst.f32(), dy.f32(), dsrc.f32(), l.w_layer_t.data(), l.w_iter_t.data(),
                   l.bias.data(), l.dw_layer.data(), l.dw_iter.data(), l.dbias.data(), l.workspace);
  unpack_grads(l, w);
  return dsrc;
}

// The gate blocks of a layer's fused pass (null where the whole sequence is saved instead):
// under checkpointing the saved gates (16-bit or fp32), and in 16-bit mode the fp32 working
// block. Forward and backward take them in the same order from a freshly reset ckpt_arena_,
// so the backward finds the forward's last block at the same address.
CpuRecurrentLayers::GateBlocks CpuRecurrentLayers::gate_blocks(int64_t N, int64_t T, Arena& arena, bool ckpt) const {
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
void CpuRecurrentLayers::forward_fused(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& keep, bool ckpt,
                                       std::span<const int64_t> lengths) {
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
    a.w_ih = w.w_ih[d];
    a.w_hh = w.w_hh[d];
    a.b_ih = w.b_ih[d];
    a.b_hh = w.b_hh[d];
    a.x = in.f32();
    a.lengths = lengths.empty() ? nullptr : lengths.data();
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

Tensor CpuRecurrentLayers::backward_fused(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) {
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
    g.rec = packed_backward() ? &l.rec_bwd[d] : nullptr;
    g.dout = dy.f32() + d * hidden_;
    g.dx = want_dx ? dsrc.f32() : nullptr;
    g.accumulate_dx = d > 0;
    g.dw_ih = w.dw_ih[d];
    g.dw_hh = w.dw_hh[d];
    g.db_ih = w.db_ih[d];
    g.db_hh = w.db_hh[d];
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

void CpuRecurrentLayers::layer_forward(Layer& l, const RecurrentWeights& w, const Tensor& in, Arena& arena, bool training,
                                       std::span<const int64_t> lengths) {
  if (l.impl == RnnImpl::fused) {
    if (ckpt_ && training) ckpt_arena_.reset();
    forward_fused(l, w, in, arena, ckpt_ && training, lengths);
    if (ckpt_ && training) ckpt_live_ = &l;
  } else {
    forward_onednn(l, w, in, arena, training);
  }
}

Tensor CpuRecurrentLayers::layer_backward(Layer& l, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) {
  return l.impl == RnnImpl::fused ? backward_fused(l, w, dy, arena, want_dx) : backward_onednn(l, w, dy, arena);
}

// Times one training forward + backward of this layer with each implementation (in a private
// arena, gradients restored afterwards) and keeps the faster for the layer. Candidates are timed
// on the first kTuneSteps time steps only: they differ in the per-step work, which a prefix
// measures as well as the whole sequence at a fraction of the cost (issue 13 bounds the tuner at
// 2% of a quickstart). The trials run full length: padding changes which rows a step computes,
// not the per-step work the candidates differ in. oneDNN's primitive is no candidate for a run
// with lengths, which it cannot honour.
void CpuRecurrentLayers::autotune_layer(Layer& l, const RecurrentWeights& w, const Tensor& full_in, bool has_lengths) {
  constexpr int64_t kTuneSteps = 16;
  const int64_t T = full_in.shape[0], N = full_in.shape[1];
  const Tensor in = full_in.slice0(0, std::min(T, kTuneSteps));
  const int64_t Tt = in.shape[0];
  const std::string key = fmt::format("{} T={} N={} C={} H={} D={} {}{}", cell_ == RnnCell::lstm ? "lstm" : "gru", T,
                                      N, l.in, hidden_, dirs_, precision_name(precision_), ckpt_ ? " ckpt" : "");
  // The trial backward passes add into this layer's gradients (and nothing else): keep them.
  const int64_t GH = rnn_gates(cell_) * hidden_;
  std::vector<std::vector<float>> saved;
  auto each_grad = [&](auto&& fn) {
    for (int64_t d = 0; d < dirs_; ++d) {
      fn(w.dw_ih[d], GH * l.in);
      fn(w.dw_hh[d], GH * hidden_);
      fn(w.db_ih[d], GH);
      fn(w.db_hh[d], GH);
    }
  };
  each_grad([&](float* g, int64_t n) { saved.emplace_back(g, g + n); });
  Arena tune_arena;
  auto run = [&](RnnImpl impl) {
    tune_arena.reset();
    l.impl = impl;
    l.src = in;
    l.dst = tune_arena.tensor({Tt, N, hidden_ * dirs_});
    layer_forward(l, w, in, tune_arena, true, {});
    Tensor dy = tune_arena.tensor({Tt, N, hidden_ * dirs_});
    std::fill(dy.f32(), dy.f32() + dy.numel(), 1e-3f);
    layer_backward(l, w, dy, tune_arena, true);
  };
  auto fused_at = [&](const CpuKernels* k) {
    l.kernels = k;
    run(RnnImpl::fused);
  };
  std::vector<TuneCandidate> cands{{"fused", [&] { fused_at(nullptr); }}};
  if (active_isa() > Isa::avx2) cands.push_back({"fused:avx2", [&] { fused_at(&cpu_kernels(Isa::avx2)); }});
  if (!half_ && !has_lengths) cands.push_back({"onednn", [&] { run(RnnImpl::onednn); }});
  // Warm-ups size the arena (overflowing into chunks a reset merges into fresh memory): touch it
  // once before timing so no candidate pays page faults the others do not.
  const std::string choice = tuner_->choose(key, cands, [&] { tune_arena.prefault(); });
  size_t next = 0;
  each_grad([&](float* g, int64_t) { std::copy(saved[next].begin(), saved[next].end(), g); ++next; });
  // "fused" is the active level, "fused:<level>" a lower one, "onednn" the primitive.
  const auto colon = choice.find(':');
  l.impl = parse_rnn_impl(choice.substr(0, colon));
  l.kernels = colon == std::string::npos ? nullptr : &cpu_kernels(parse_isa(choice.substr(colon + 1), "autotune choice"));
  l.tuned_T = T;
  l.tuned_N = N;
}

void CpuRecurrentLayers::forward(size_t layer, const RecurrentWeights& w, const Tensor& in, const Tensor& y,
                                 Arena& arena, bool training, std::span<const int64_t> lengths) {
  Layer& l = layers_.at(layer);
  ST_CHECK(in.shape.size() == 3 && in.shape[2] == l.in, "recurrent layer {} input must be [time, batch, {}], got {}",
           layer, l.in, shape_str(in.shape));
  const int64_t T = in.shape[0], N = in.shape[1];
  if (half_) convert_weights_half(l, w);  // once per step; backward reuses the copies
  // A smaller batch of a tuned length (an epoch's short last batch) keeps the full batch's
  // choice: it runs once an epoch, and timing it cost as much as it could save.
  const bool tuned = l.tuned_T == T && N <= l.tuned_N;
  if (autotune_ && training && !tuned) autotune_layer(l, w, in, !lengths.empty());
  // oneDNN's RNN primitive runs every sample to T: a layer on it that meets lengths moves to the
  // fused kernels for good when the autotuner put it there (a choice cached by a run without
  // lengths, or made at an evaluation-only shape), and refuses when the config asked for it.
  if (!lengths.empty() && l.impl == RnnImpl::onednn) {
    ST_CHECK(autotune_, "runtime.rnn_impl onednn cannot run variable-length sequences (this batch has per-sample "
             "lengths): oneDNN's RNN primitive has no per-sample lengths. Use runtime.rnn_impl fused (the default), "
             "which stops each sample at its length");
    l.impl = RnnImpl::fused;
  }
  l.src = in;
  l.dst = y;
  layer_forward(l, w, in, arena, training, lengths);
}

Tensor CpuRecurrentLayers::backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena,
                                    bool want_dx) {
  return layer_backward(layers_.at(layer), w, dy, arena, want_dx);
}

}  // namespace seqtrain
