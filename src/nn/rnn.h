// RnnStack: a multi-layer, optionally bidirectional LSTM or GRU with PyTorch's semantics
// (GRU "linear before reset"), parameters named and shaped like nn.LSTM / nn.GRU's state_dict
// (<prefix>.weight_ih_l{k}[_reverse], weight_hh, bias_ih, bias_hh; gates i,f,g,o / r,z,n),
// and dropout between layers in training, as nn.LSTM(dropout=p) does.
//
// Each layer runs as one oneDNN primitive (both directions at once). oneDNN wants weights as
// ldigo with its own gate order and one summed bias per gate (plus the GRU's recurrent
// new-gate bias) for forward, and ldgoi (PyTorch's [gate*hidden, input] with oneDNN's gate
// order) for backward, so forward() and backward() pack the PyTorch-layout parameters and
// backward() unpacks the ldigo gradients back; each is one pass over the weights, small next
// to the recurrence itself.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/rnn_fused.h"
#include "backend/cpu/rnn_primitive.h"
#include "core/rng.h"
#include "nn/dropout.h"
#include "nn/params.h"

namespace seqtrain {

// Which kernels run the layers: seqtrain's fused kernels on PyTorch's layout (the default,
// faster on CPU) or oneDNN's RNN primitives. Both are tested against PyTorch.
enum class RnnImpl { fused, onednn };
RnnImpl parse_rnn_impl(const std::string& name);

class RnnStack {
 public:
  RnnStack(ParamStore& params, const std::string& prefix, RnnCell cell, int64_t input_size,
           int64_t hidden, int64_t layers, bool bidirectional, float dropout, RnnImpl impl = RnnImpl::fused);

  void init(Rng& rng);  // uniform(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter

  // x: [N, T, C] (batch first). Returns the top layer's output, [T, N, H*D] (time major),
  // so the last time step is the contiguous block out[T-1].
  Tensor forward(const Tensor& x, Arena& arena, bool training, uint64_t seed);
  // dy: [T, N, H*D]. Accumulates parameter gradients. Returns dx [N, T, C] when want_dx.
  Tensor backward(const Tensor& dy, Arena& arena, bool want_dx);

  int64_t output_size() const { return hidden_ * dirs_; }

 private:
  struct Layer {
    int64_t in = 0;
    std::vector<size_t> w_ih, w_hh, b_ih, b_hh;    // ParamStore indices, one per direction
    std::vector<float> w_layer, w_iter, bias;       // oneDNN layout (ldigo), packed each forward
    std::vector<float> w_layer_t, w_iter_t;         // ldgoi copies for backward
    std::vector<float> dw_layer, dw_iter, dbias;    // oneDNN layout gradients
    std::unique_ptr<RnnPrimitive> prim;
    Dropout drop;                                   // applied to this layer's output
    Tensor src, dst;                                // saved for backward
    void* workspace = nullptr;                      // oneDNN's, or
    std::vector<FusedRnnArgs> fused;                // the fused kernels' saved state, per direction
  };
  RnnPrimitive& primitive(Layer& l, int64_t T, int64_t N, bool training);
  void pack(Layer& l);
  void pack_backward(Layer& l);
  void unpack_grads(Layer& l);
  void forward_fused(Layer& l, const Tensor& in, Arena& arena);
  Tensor backward_fused(Layer& l, const Tensor& dy, Arena& arena);
  void forward_onednn(Layer& l, const Tensor& in, Arena& arena, bool training);
  Tensor backward_onednn(Layer& l, const Tensor& dy, Arena& arena);

  ParamStore& params_;
  RnnCell cell_;
  RnnImpl impl_;
  int64_t hidden_, dirs_;
  std::vector<Layer> layers_;
};

}  // namespace seqtrain
