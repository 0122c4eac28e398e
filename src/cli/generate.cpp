// `seqtrain generate`. See generate.h.
#include "cli/generate.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <numeric>

#include "models/registry.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
// Index of a draw from softmax(logits / temperature) over the top_k largest (all when 0).
int32_t sample(const std::vector<float>& logits, double temperature, int64_t top_k, Rng& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (temperature == 0) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = top_k > 0 ? std::min(top_k, V) : V;
  // Ties broken by id so a given seed always draws the same text.
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::vector<double> p(k);
  const double top = logits[order[0]];
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[order[i]] - top) / temperature);
  double u = rng.uniform() * sum;
  for (int64_t i = 0; i < k; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[k - 1];  // u landed on the rounding slack at the very end
}
}  // namespace

LoadedGenerator load_generator(const std::string& path) {
  LoadedModel m = load_model(path, LoadOptions{.from_weights = true, .bare_ok = true});
  LoadedGenerator l;
  l.dir = m.dir;
  l.generator = &text_generator(*m.model);
  const fs::path dir(l.dir);
  // The vocabulary: vocab.json beside the weights, else the copy every text run's state.json holds.
  const nlohmann::json& state = m.state;
  const bool in_state = state.is_object() && state.contains("vocab") && !state.at("vocab").is_null();
  ST_CHECK(fs::exists(dir / "vocab.json") || in_state,
           "{} is missing and {} holds no \"vocab\": generate needs the vocabulary the model was trained with, which "
           "a data.source: text run saves with every checkpoint; use a checkpoint of such a run",
           (dir / "vocab.json").string(), (dir / "state.json").string());
  l.vocab = fs::exists(dir / "vocab.json") ? Vocab::load((dir / "vocab.json").string())
                                           : Vocab::from_json(state.at("vocab"), (dir / "state.json").string() + ": vocab");
  ST_CHECK(l.vocab.size() == l.generator->vocab_size(),
           "{} has {} tokens but the model's embed.weight has {} rows: the vocabulary belongs to another model",
           (dir / "vocab.json").string(), l.vocab.size(), l.generator->vocab_size());
  l.model = std::move(m.model);
  return l;
}

std::string generate_text(TextGenerator& model, const Vocab& vocab, const GenerateArgs& a, int64_t* unknown) {
  ST_CHECK(!a.prompt.empty(), "--prompt is empty: give at least one character for the model to continue");
  ST_CHECK(std::isfinite(a.temperature) && a.temperature >= 0,
           "--temperature {} is invalid: use 0 for greedy decoding or a positive value (1 samples the model as is)",
           a.temperature);
  ST_CHECK(a.top_k >= 0, "--top-k {} is invalid: use 0 for every token or a positive count", a.top_k);
  ST_CHECK(a.tokens >= 0, "--tokens {} is invalid: use a count of 0 or more", a.tokens);
  const std::vector<int32_t> ids = vocab.encode(a.prompt, "--prompt", unknown);
  std::unique_ptr<GenState> state = model.begin();
  std::vector<float> logits(model.vocab_size());
  for (int32_t id : ids) model.next_logits(*state, id, logits.data());
  Rng rng(a.seed);
  std::vector<int32_t> out;
  // A char vocabulary's <unk> stands for characters the training text never had: no target was
  // ever <unk>, so drawing it (a short-trained model may) would print U+FFFD, never a character.
  // Masked unless it is the only token.
  const bool mask_unk = vocab.kind() == VocabKind::Char && model.vocab_size() > 1;
  for (int64_t i = 0; i < a.tokens; ++i) {
    if (mask_unk) logits[Vocab::kUnk] = -std::numeric_limits<float>::infinity();
    out.push_back(sample(logits, a.temperature, a.top_k, rng));
    if (i + 1 < a.tokens) model.next_logits(*state, out.back(), logits.data());
  }
  return a.prompt + vocab.decode(out);
}

std::string generate_text(Model& model, const Vocab& vocab, const GenerateArgs& a, int64_t* unknown) {
  return generate_text(text_generator(model), vocab, a, unknown);
}

CLI::App* add_generate_command(CLI::App& app, GenerateArgs& a) {
  auto* g = app.add_subcommand("generate", "Continue a prompt with a character language model (char_lstm, char_gru or gpt)");
  g->add_option("checkpoint", a.checkpoint, "checkpoints/<tag> directory or run directory")->required();
  g->add_option("--prompt", a.prompt, "text to start from")->required();
  g->add_option("--tokens", a.tokens, "characters to generate (default 200)");
  g->add_option("--temperature", a.temperature, "softmax temperature; 0 = greedy (default 1)");
  g->add_option("--top-k", a.top_k, "sample only among the k most likely tokens; 0 = all (default)");
  g->add_option("--seed", a.seed, "sampling seed (default 0)");
  return g;
}

int run_generate(const GenerateArgs& a) {
  LoadedGenerator l = load_generator(a.checkpoint);
  int64_t unknown = 0;
  const std::string text = generate_text(*l.generator, l.vocab, a, &unknown);
  if (unknown > 0)
    std::fprintf(stderr,
                 "seqtrain: note: %lld character(s) of the prompt are not in the model's vocabulary and were read as "
                 "<unk> (id 0)\n",
                 static_cast<long long>(unknown));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace seqtrain
