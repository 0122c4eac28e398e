// `seqtrain generate`: text from a model whose registry family generates text (char_lstm /
// char_gru today). Loads the checkpoint through load_model, with the vocabulary from vocab.json
// or state.json, feeds the prompt through the model's TextGenerator keeping its state, then
// samples tokens one at a time (greedy at temperature 0, otherwise softmax(logits /
// temperature), optionally restricted to the top k) and prints the prompt followed by the
// continuation. The sampling loop only sees the TextGenerator interface, so a new generating
// family needs no change here. A language model saved without a config (from PyTorch) is
// rebuilt from its weight shapes.
#pragma once
#include <cstdint>
#include <string>

#include "data/text.h"
#include "models/model.h"
#include "models/text_generator.h"

namespace CLI {
class App;
}

namespace seqtrain {

struct GenerateArgs {
  std::string checkpoint, prompt;
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0 = every token
  uint64_t seed = 0;
};

// A text-generating checkpoint, loaded. `path` is a checkpoint directory or a run directory (its
// checkpoints/best). Errors name the missing file, the mismatch or the model type that does
// not generate text, and what to do.
struct LoadedGenerator {
  std::unique_ptr<Model> model;
  TextGenerator* generator = nullptr;  // model's interface
  Vocab vocab;
  std::string dir;  // the checkpoint directory actually read
};
LoadedGenerator load_generator(const std::string& path);

// Prompt + `tokens` sampled continuation characters (the text, without a trailing newline).
// Characters of the prompt missing from the vocabulary become <unk>; *unknown receives their
// count. Errors for an empty prompt, temperature < 0 and top_k < 0.
std::string generate_text(TextGenerator& generator, const Vocab& vocab, const GenerateArgs& args,
                          int64_t* unknown = nullptr);
// The same through the model's TextGenerator; error naming the model type when it has none.
std::string generate_text(Model& model, const Vocab& vocab, const GenerateArgs& args, int64_t* unknown = nullptr);

// Registers the subcommand's options into `args`; main() calls run_generate when it parsed.
CLI::App* add_generate_command(CLI::App& app, GenerateArgs& args);
int run_generate(const GenerateArgs& args);

}  // namespace seqtrain
