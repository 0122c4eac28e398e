// RnnStack: parameters, initialisation, dropout and the loop over layers; each layer's
// arithmetic is one call into the ParamStore's Backend (backend/backend.h's RecurrentLayers).
#include "nn/rnn.h"
#include "nn/grad_ready.h"
#include "core/trace.h"

#include <cmath>
#include <cstring>

#include "core/rng.h"

namespace seqtrain {

static RnnOptions options_with(const std::string& impl) {
  RnnOptions o;
  o.impl = impl;
  return o;
}

RnnStack::RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
                   int64_t hidden, int64_t layers, bool bidirectional, float dropout, const std::string& impl)
    : RnnStack(params, prefix, cell, input_size, hidden, layers, bidirectional, dropout, options_with(impl)) {}

RnnStack::RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
                   int64_t hidden, int64_t layers, bool bidirectional, float dropout, const RnnOptions& options)
    : params_(params), hidden_(hidden), dirs_(bidirectional ? 2 : 1), precision_(options.precision),
      ckpt_(options.grad_checkpoint) {
  ST_CHECK(input_size > 0 && hidden > 0 && layers > 0, "RNN sizes must be positive (input {}, hidden {}, layers {})",
           input_size, hidden, layers);
  const int64_t G = rnn_gates(cell);
  RecurrentSpec spec{cell, hidden, dirs_, {}, options};
  layers_.resize(layers);
  for (int64_t k = 0; k < layers; ++k) {
    Layer& l = layers_[k];
    l.in = k == 0 ? input_size : hidden * dirs_;
    spec.inputs.push_back(l.in);
    for (int64_t d = 0; d < dirs_; ++d) {
      const std::string sfx = "_l" + std::to_string(k) + (d ? "_reverse" : "");
      l.w_ih.push_back(params.add(prefix + ".weight_ih" + sfx, {G * hidden, l.in}));
      l.w_hh.push_back(params.add(prefix + ".weight_hh" + sfx, {G * hidden, hidden}));
      l.b_ih.push_back(params.add(prefix + ".bias_ih" + sfx, {G * hidden}));
      l.b_hh.push_back(params.add(prefix + ".bias_hh" + sfx, {G * hidden}));
    }
    l.drop = Dropout(k + 1 < layers ? dropout : 0.f, &params.backend());
  }
  impl_ = params.backend().make_recurrent(spec);
  // One call for the stack only where nothing runs between its layers.
  stacked_ = layers > 1 && dropout == 0.f && impl_->runs_stack();
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

RecurrentWeights RnnStack::weights(const Layer& l) {
  RecurrentWeights w;
  for (int64_t d = 0; d < dirs_; ++d) {
    w.w_ih[d] = params_.param(l.w_ih[d]).f32();
    w.w_hh[d] = params_.param(l.w_hh[d]).f32();
    w.b_ih[d] = params_.param(l.b_ih[d]).f32();
    w.b_hh[d] = params_.param(l.b_hh[d]).f32();
    w.dw_ih[d] = params_.grad(l.w_ih[d]).f32();
    w.dw_hh[d] = params_.grad(l.w_hh[d]).f32();
    w.db_ih[d] = params_.grad(l.b_ih[d]).f32();
    w.db_hh[d] = params_.grad(l.b_hh[d]).f32();
  }
  return w;
}

// [A, B, C] -> [B, A, C] on the backend (the activations may be device memory).
Tensor transpose01(Backend& backend, const Tensor& x, Arena& arena) {
  ST_CHECK(x.shape.size() == 3 && x.contiguous(), "transpose01 needs a contiguous [A, B, C] tensor, got {}",
           shape_str(x.shape));
  const int64_t A = x.shape[0], B = x.shape[1], C = x.shape[2];
  Tensor y = arena.tensor({B, A, C});
  backend.transpose(x.f32(), y.f32(), A, B, C);
  return y;
}

Tensor RnnStack::forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed,
                         std::span<const int64_t> lengths) {
  ST_CHECK(x.shape.size() == 3 && x.shape[2] == layers_[0].in,
           "RNN input must be [batch, time, {}], got {}", layers_[0].in, shape_str(x.shape));
  // The layers work time-major (and oneDNN 2.6's backward mishandles batch-first input), so
  // the batch is transposed once here.
  return forward_time_major(transpose01(params_.backend(), x, arena), arena, training, seed, lengths);
}

Tensor RnnStack::forward_time_major(const Tensor& xt, Arena& arena, bool training, DropoutSeed seed,
                                    std::span<const int64_t> lengths) {
  ST_CHECK(xt.shape.size() == 3 && xt.shape[2] == layers_[0].in && xt.contiguous(),
           "RNN input must be a contiguous [time, batch, {}], got {}", layers_[0].in, shape_str(xt.shape));
  const int64_t T = xt.shape[0], N = xt.shape[1];
  ST_CHECK(lengths.empty() || static_cast<int64_t>(lengths.size()) == N,
           "RNN lengths must give one length per sample ({}), got {}", N, lengths.size());
  for (size_t n = 0; n < lengths.size(); ++n)
    ST_CHECK(lengths[n] >= 1 && lengths[n] <= T, "RNN length of sample {} is {}: it must be in [1, {}]", n,
             lengths[n], T);
  // The layers read them again in backward, after the caller's span may be gone.
  lengths_.assign(lengths.begin(), lengths.end());
  if (stacked_) {
    Tensor out = arena.tensor({T, N, hidden_ * dirs_});
    ST_TRACE("rnn.stack.forward", "layer", [&] { return trace::shape_args(xt.shape, 0); });
    impl_->forward_stack(all_weights(), xt, out, arena, training, lengths_);
    return out;
  }
  Tensor in = xt;
  for (size_t k = 0; k < layers_.size(); ++k) {
    Layer& l = layers_[k];
    Tensor out = arena.tensor({T, N, hidden_ * dirs_});
    {
      ST_TRACE("rnn.layer.forward", "layer", [&] { return trace::shape_args(in.shape, static_cast<int64_t>(k)); });
      impl_->forward(k, weights(l), in, out, arena, training, lengths_);
    }
    in = l.drop.forward(out, arena, training, mix_seed(seed, k), /*batch_dim=*/1);  // [T, N, H]
  }
  return in;
}

std::vector<RecurrentWeights> RnnStack::all_weights() {
  std::vector<RecurrentWeights> w;
  for (const Layer& l : layers_) w.push_back(weights(l));
  return w;
}

Tensor RnnStack::backward(const Tensor& dy, Arena& arena, bool want_dx, bool report_ready) {
  if (stacked_) {
    ST_TRACE("rnn.stack.backward", "layer", [&] { return trace::shape_args(dy.shape, 0); });
    const Tensor dx = impl_->backward_stack(all_weights(), dy, arena, want_dx);
    return want_dx ? transpose01(params_.backend(), dx, arena) : Tensor();
  }
  Tensor d = dy;
  for (size_t k = layers_.size(); k-- > 0;) {
    Layer& l = layers_[k];
    d = l.drop.backward(d, arena);
    // The first layer's input gradient is only computed when the caller wants it (the
    // forecaster does not: its input is data).
    ST_TRACE("rnn.layer.backward", "layer", [&] { return trace::shape_args(d.shape, static_cast<int64_t>(k)); });
    d = impl_->backward(k, weights(l), d, arena, k > 0 || want_dx);
    // Layers register in order, so layer k's and everything above it are final now.
    if (report_ready) grads_final_from(params_.entries()[l.w_ih[0]].offset);
  }
  return want_dx ? transpose01(params_.backend(), d, arena) : Tensor();
}

}  // namespace seqtrain
