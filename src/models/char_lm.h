// CharLm: a character-level language model. Embedding(vocab, embed) -> LSTM/GRU stack ->
// dropout -> Linear(hidden, vocab) at every time step, so each position predicts the next
// token. Mirrors python/seqtrain_torch/models.py::CharLM (embed.weight, rnn.*, head.*).
//
// forward() takes [B, T] token ids (f32 holding integers, as TextSource fills them, or i64)
// and returns logits [B, T, V]: the [B, T*V] block of the Model contract with the class
// dimension split off, so nn/loss's cross-entropy reads it as B*T rows of V classes
// (F.cross_entropy(logits.view(-1, V), y.view(-1)) in PyTorch).
// A causal LM must not see the future, so a bidirectional RNN is refused.
// runtime.precision (ModelEnv::precision) applies to the RNN layers; the head stays fp32, as the
// forecasters' (models/forecaster.h): the recurrent GEMMs are the step, the head's one product
// [B*T, H] x [H, V] is a small share of it, and fp32 logits keep the bf16 tolerance tests' bounds.
//
// step() is the incremental forward generation needs: one token, with the RNN state carried
// in a CharLmState. It is a plain fp32 loop over the same parameters (generation runs one
// token at a time, where kernel speed does not matter) and matches forward() at every step.
// It is also CharLm's TextGenerator (models/text_generator.h), which generate goes through.
#pragma once
#include <vector>

#include "models/text_model.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"

namespace seqtrain {

// Per layer: h [H], and for LSTM c [H]; zeros at the start of a text.
struct CharLmState : GenState {
  std::vector<std::vector<float>> h, c;
};

class CharLm : public TextModel {
 public:
  explicit CharLm(const ModelSpec& spec, const ModelEnv& env = {});
  Tensor forward(const Batch& batch, StepContext& ctx) override;
  void backward(StepContext& ctx) override;

  CharLmState initial_state() const;
  // Feeds token `id` and writes the next-token logits [V] into `logits`; advances `state`.
  // Error naming the id and the vocabulary size when id is outside [0, V).
  void step(int64_t id, CharLmState& state, float* logits);

  // TextGenerator: begin() is initial_state(), next_logits() is step().
  std::unique_ptr<GenState> begin() const override;
  void next_logits(GenState& state, int64_t token, float* logits) override;


 private:
  void init_params(Rng& rng) override;
  bool lstm_;
  Embedding embed_;
  RnnStack rnn_;
  Dropout drop_;
  Linear head_;
  int64_t B_ = 0, T_ = 0;
};

}  // namespace seqtrain
