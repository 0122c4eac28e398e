// TextModel: a Model that generates text (the char RNN, the GPT). Its vocabulary is its spec's
// and it is its own TextGenerator, so the registry's "generates text" families share these two
// answers instead of each writing them out.
#pragma once
#include "models/model.h"
#include "models/text_generator.h"

namespace seqtrain {

class TextModel : public Model, public TextGenerator {
 public:
  int64_t vocab_size() const override { return spec_.vocab_size; }
  TextGenerator* as_text_generator() override { return this; }
  // Every input id inside the vocabulary (models/token_ids.h), as forward checks them.
  void check_batch(const Batch& host) const override;

 protected:
  using Model::Model;
};

}  // namespace seqtrain
