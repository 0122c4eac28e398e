// CharLM: a next-token language model for data.source text. Token ids -> Embedding (dim =
// hidden) -> RNN stack -> dropout -> Linear to vocab logits at every time step, so one window
// of block_size tokens trains block_size next-token predictions (cross-entropy over all
// positions). Mirrors python/seqtrain_torch/models.py::CharLM (names emb.*, rnn.*, head.*).
#pragma once
#include "models/model.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace seqtrain {

class CharLM : public Model {
 public:
  explicit CharLM(const ModelSpec& spec);  // spec.vocab > 0; spec.input_size must be 1
  // x: [B, T, 1] (or [B, T]) f32 holding integer ids. Returns logits [B, T, vocab].
  Tensor forward(const Tensor& x, Arena& arena, bool training) override;
  // dy: [B, T, vocab].
  void backward(const Tensor& dy, Arena& arena) override;
  void init(Rng& rng) override;

 private:
  Embedding emb_;
  RnnStack rnn_;
  Dropout drop_;
  Linear head_;
  int64_t batch_ = 0, steps_ = 0;  // of the last forward
};

}  // namespace seqtrain
