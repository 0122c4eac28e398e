// RnnStack: a multi-layer, optionally bidirectional LSTM or GRU with PyTorch's semantics
// (GRU "linear before reset"), parameters named and shaped like nn.LSTM / nn.GRU's state_dict
// (<prefix>.weight_ih_l{k}[_reverse], weight_hh, bias_ih, bias_hh; gates i,f,g,o / r,z,n),
// and dropout between layers in training, as nn.LSTM(dropout=p) does.
//
// The layers' arithmetic runs on the ParamStore's Backend (backend/backend.h), one call per
// layer (all directions), or one for the whole stack where the backend runs stacked layers
// together and no dropout sits between them (CUDA: cuDNN's multi-layer RNN). On the CPU backend
// seqtrain's fused kernels or oneDNN's primitive (runtime.rnn_impl, the autotuner), on the
// reference backend a plain loop over time steps.
// docs/ARCHITECTURE.md, "The RNN layers" and "Backends", has the details.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "nn/params.h"

namespace seqtrain {

// x [A, B, C] -> [B, A, C] in the arena, on `backend` (the stack works time-major, its callers
// batch-first; the activations may be device memory).
Tensor transpose01(Backend& backend, const Tensor& x, Arena& arena);

class RnnStack {
 public:
  RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
           int64_t hidden, int64_t layers, bool bidirectional, float dropout, const std::string& impl = "fused");
  RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
           int64_t hidden, int64_t layers, bool bidirectional, float dropout, const RnnOptions& options);

  void init(Rng& rng);  // uniform(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter

  // x: [N, T, C] (batch first). Returns the top layer's output, [T, N, H*D] (time major),
  // so the last time step is the contiguous block out[T-1].
  // lengths: empty (every sample runs all T steps) or each sample's valid steps [N], in [1, T]
  // (host memory; a Batch's lengths through host_lengths()): sample n stops at step lengths[n],
  // as PyTorch's pack_padded_sequence: its output there and after is 0, its reverse direction
  // starts at its last valid step, and its padded inputs reach no output and no gradient. Its
  // final state is its output at step lengths[n] - 1 (forward direction) and step 0 (reverse).
  Tensor forward(const Tensor& x, Arena& arena, bool training, DropoutSeed seed, std::span<const int64_t> lengths = {});
  // The same over time-major input xt [time, batch, features] (no transpose).
  Tensor forward_time_major(const Tensor& xt, Arena& arena, bool training, DropoutSeed seed,
                            std::span<const int64_t> lengths = {});
  // dy: [T, N, H*D]. Accumulates parameter gradients. Returns dx [N, T, C] when want_dx.
  // report_ready: after each layer, tell the step's GradReady hook (nn/grad_ready.h) that
  // [that layer's first parameter, end) is final; only a model whose parameters above the stack
  // are already final may ask (the forecaster without a reconstruction head).
  Tensor backward(const Tensor& dy, Arena& arena, bool want_dx, bool report_ready = false);

  int64_t output_size() const { return hidden_ * dirs_; }

  // Gradient checkpointing keeps the recomputed per-layer state in a private arena (one layer
  // at a time) instead of the caller's: its high-water mark in bytes. Activation memory of a
  // step = caller's Arena::high_water() + this (0 without checkpointing).
  size_t checkpoint_scratch_bytes() const { return impl_->scratch_bytes(); }
  const Precision& precision() const { return precision_; }
  bool grad_checkpoint() const { return ckpt_; }
  // The name of the kernels layer k runs now (after autotuning, the chosen one): the backend's
  // word (RecurrentLayers::layer_impl).
  std::string layer_impl(size_t k) const { return impl_->layer_impl(k); }

 private:
  struct Layer {
    int64_t in = 0;
    std::vector<size_t> w_ih, w_hh, b_ih, b_hh;  // ParamStore indices, one per direction
    Dropout drop;                                 // applied to this layer's output
  };
  RecurrentWeights weights(const Layer& l);
  std::vector<RecurrentWeights> all_weights();

  ParamStore& params_;
  int64_t hidden_, dirs_;
  Precision precision_;
  bool ckpt_ = false;
  bool stacked_ = false;  // the backend runs the whole stack in one call (no dropout between layers)
  std::vector<Layer> layers_;
  std::vector<int64_t> lengths_;  // the last forward's, which its layers read again in backward
  std::unique_ptr<RecurrentLayers> impl_;  // the backend's layers: kernels and saved state
};

}  // namespace seqtrain
