// TextGenerator: what text generation needs of a model, and nothing about which model it is:
// start a text, then one token in and the next token's logits out. The state between tokens
// belongs to the model (an RNN's h and c today, a transformer's KV cache later), so the
// sampling loop in cli/generate.cpp works unchanged for any family the registry marks as
// generating text.
#pragma once
#include <cstdint>
#include <memory>

namespace seqtrain {

// A model's generation state; each model derives its own.
struct GenState {
  virtual ~GenState() = default;
};

class TextGenerator {
 public:
  virtual ~TextGenerator() = default;
  virtual int64_t vocab_size() const = 0;
  // The state before any token has been read.
  virtual std::unique_ptr<GenState> begin() const = 0;
  // Reads `token`, writes the next token's logits [vocab_size()] into `logits`, advances
  // `state`. Error for a token outside the vocabulary or a state begin() did not make.
  virtual void next_logits(GenState& state, int64_t token, float* logits) = 0;
};

}  // namespace seqtrain
