// ReferenceRecurrentLayers: the reference backend's LSTM/GRU layers, a loop over time steps
// per direction written from PyTorch's equations (nn.LSTM; nn.GRU's linear-before-reset
// n = tanh(W_in x + b_in + r * (W_hn h + b_hn))), fp64 accumulation everywhere and fp32 storage
// of what backward needs. Slow on purpose-built clarity: the oracle the fast kernels answer to.
#pragma once
#include <span>
#include <vector>

#include "backend/backend.h"

namespace seqtrain {

class ReferenceRecurrentLayers final : public RecurrentLayers {
 public:
  explicit ReferenceRecurrentLayers(const RecurrentSpec& spec);
  SEQTRAIN_RECURRENT_LAYERS_PASSES

 private:
  struct Saved {
    Tensor x, y;                     // the layer's input [T, N, C] and output [T, N, H*D]
    std::span<const int64_t> lengths;  // [N] valid steps, or empty: all T
    std::vector<float> gates[2];     // activated gates per direction, [T, N, G*H]
    std::vector<float> extra[2];     // LSTM cell state c_t, GRU W_hn h_{t-1} + b_hn, [T, N, H]
  };
  static bool padded(const Saved& s, int64_t t, int64_t n);
  void forward_dir(Saved& s, const RecurrentWeights& w, int64_t d);
  void backward_dir(Saved& s, const RecurrentWeights& w, int64_t d, const float* dy, std::vector<double>* dx);

  RecurrentSpec spec_;
  std::vector<Saved> saved_;
};

}  // namespace seqtrain
