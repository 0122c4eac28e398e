// Forecaster: RNN over the window -> output at the last time step -> dropout -> Linear to
// horizon*targets. Mirrors python/seqtrain_torch/models.py::Forecaster (names rnn.*, head.*).
#pragma once
#include "models/model.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace seqtrain {

class Forecaster : public Model {
 public:
  explicit Forecaster(const ModelSpec& spec);
  Tensor forward(const Tensor& x, Arena& arena, bool training) override;
  void backward(const Tensor& dy, Arena& arena) override;
  void init(Rng& rng) override;

  RnnStack& rnn() { return rnn_; }
  size_t extra_activation_bytes() const override { return rnn_.checkpoint_scratch_bytes(); }
  Autotuner* autotuner() override { return rnn_.autotuner(); }
  const std::string& precision_note() const override { return precision_note_; }

 private:
  std::string precision_note_;  // declared before rnn_: rnn_'s initialiser writes it
  RnnStack rnn_;
  Dropout drop_;
  Linear head_;
  Shape top_shape_;  // [T, N, H*D] of the last forward
};

}  // namespace seqtrain
