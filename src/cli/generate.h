// `seqtrain generate`: text from a character language model (char_lstm / char_gru).
// Loads a checkpoint directory's model.safetensors and vocab.json, feeds the prompt through
// the RNN keeping its state, then samples tokens one at a time (greedy at temperature 0,
// otherwise softmax(logits / temperature), optionally restricted to the top k) and prints
// the prompt followed by the continuation. The model's shape is read from the weights
// themselves (embed.weight [V, E], rnn.weight_hh_l{k} [G*H, H]), so no config is needed.
#pragma once
#include <cstdint>
#include <string>

#include "data/text.h"
#include "models/char_lm.h"

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

// A char LM checkpoint, loaded. `path` is a checkpoint directory or a run directory (its
// checkpoints/best). Errors name the missing file or the mismatch and what to do.
struct LoadedLm {
  std::unique_ptr<CharLm> model;
  Vocab vocab;
  std::string dir;  // the checkpoint directory actually read
};
LoadedLm load_char_lm(const std::string& path);

// Prompt + `tokens` sampled continuation characters (the text, without a trailing newline).
// Characters of the prompt missing from the vocabulary become <unk>; *unknown receives their
// count. Errors for an empty prompt, temperature < 0 and top_k < 0.
std::string generate_text(CharLm& model, const Vocab& vocab, const GenerateArgs& args, int64_t* unknown = nullptr);

// Registers the subcommand's options into `args`; main() calls run_generate when it parsed.
CLI::App* add_generate_command(CLI::App& app, GenerateArgs& args);
int run_generate(const GenerateArgs& args);

}  // namespace seqtrain
