#include "nn/rnn.h"

#include <cmath>
#include <cstring>

#include "core/rng.h"

namespace seqtrain {
namespace {
// oneDNN gate g reads PyTorch gate kGateFrom[g]. LSTM orders agree (i, f, g, o); oneDNN's GRU
// is (u, r, o) where PyTorch's is (r, z, n), and u = z.
constexpr int kLstmGates[4] = {0, 1, 2, 3};
constexpr int kGruGates[3] = {1, 0, 2};
const int* gate_from(RnnCell c) { return c == RnnCell::lstm ? kLstmGates : kGruGates; }
}  // namespace

RnnStack::RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
                   int64_t hidden, int64_t layers, bool bidirectional, float dropout, RnnImpl impl)
    : params_(params), cell_(cell), impl_(impl), hidden_(hidden), dirs_(bidirectional ? 2 : 1) {
  ST_CHECK(input_size > 0 && hidden > 0 && layers > 0, "RNN sizes must be positive (input {}, hidden {}, layers {})",
           input_size, hidden, layers);
  const int64_t G = rnn_gates(cell);
  layers_.resize(layers);
  for (int64_t k = 0; k < layers; ++k) {
    Layer& l = layers_[k];
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

void RnnStack::forward_fused(Layer& l, const Tensor& in, Arena& arena) {
  const int64_t T = in.shape[0], N = in.shape[1], G = rnn_gates(cell_) * hidden_;
  l.fused.resize(dirs_);
  for (int64_t d = 0; d < dirs_; ++d) {
    FusedRnnArgs& a = l.fused[d];
    a.cell = cell_;
    a.reverse = d == 1;
    a.T = T; a.N = N; a.C = l.in; a.H = hidden_;
    a.w_ih = params_.param(l.w_ih[d]).f32();
    a.w_hh = params_.param(l.w_hh[d]).f32();
    a.b_ih = params_.param(l.b_ih[d]).f32();
    a.b_hh = params_.param(l.b_hh[d]).f32();
    a.x = in.f32();
    a.out = l.dst.f32() + d * hidden_;
    a.ld_out = hidden_ * dirs_;
    a.gates = arena.tensor({T, N, G}).f32();
    a.extra = arena.tensor({T, N, hidden_}).f32();
    a.scratch = arena.tensor({N, G}).f32();
    fused_rnn_forward(a);
  }
}

Tensor RnnStack::backward_fused(Layer& l, const Tensor& dy, Arena& arena) {
  const int64_t T = l.src.shape[0], N = l.src.shape[1], G = rnn_gates(cell_) * hidden_;
  Tensor dsrc = arena.tensor(l.src.shape);
  Tensor ones = arena.tensor({T * N});
  std::fill(ones.f32(), ones.f32() + T * N, 1.f);
  Tensor dgi = arena.tensor({T, N, G});
  Tensor dgh = cell_ == RnnCell::gru ? arena.tensor({T, N, G}) : dgi;
  Tensor dh = arena.tensor({N, hidden_}), dc = arena.tensor({N, hidden_});
  for (int64_t d = 0; d < dirs_; ++d) {
    FusedRnnGrads g;
    g.dout = dy.f32() + d * hidden_;
    g.dx = dsrc.f32();
    g.accumulate_dx = d > 0;
    g.dw_ih = params_.grad(l.w_ih[d]).f32();
    g.dw_hh = params_.grad(l.w_hh[d]).f32();
    g.db_ih = params_.grad(l.b_ih[d]).f32();
    g.db_hh = params_.grad(l.b_hh[d]).f32();
    g.dgi = dgi.f32(); g.dgh = dgh.f32(); g.dh = dh.f32(); g.dc = dc.f32();
    g.ones = ones.f32();
    fused_rnn_backward(l.fused[d], g);
  }
  return dsrc;
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
    l.src = in;
    l.dst = arena.tensor({T, N, hidden_ * dirs_});
    if (impl_ == RnnImpl::fused) forward_fused(l, in, arena);
    else forward_onednn(l, in, arena, training);
    in = l.drop.forward(l.dst, arena, training, mix_seed(seed, k));
  }
  return in;
}

Tensor RnnStack::backward(const Tensor& dy, Arena& arena, bool want_dx) {
  Tensor d = dy;
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& l = layers_[k];
    d = l.drop.backward(d, arena);
    d = impl_ == RnnImpl::fused ? backward_fused(l, d, arena) : backward_onednn(l, d, arena);
  }
  return want_dx ? transpose01(d, arena) : Tensor();
}

}  // namespace seqtrain
