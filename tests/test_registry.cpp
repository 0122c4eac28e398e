// The seams of issue 21: the model registry (models/registry.h) is the one place a model.type is
// looked up, a resolved spec survives JSON, load_model (train/load_model.h) rebuilds the model
// that trained from a run or a checkpoint directory (with state.json's "model_spec" or without
// it), and generate goes through the TextGenerator interface, refusing models that have none.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "cli/generate.h"
#include "config/config.h"
#include "data/dataset.h"
#include "data/text.h"
#include "models/char_lm.h"
#include "config/model_config.h"
#include "models/registry.h"
#include "test_trainer_util.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/load_model.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;
using cli::Result;
using cli::run_seqtrain;

TEST(ModelRegistry, UnknownFamilyIsAnErrorListingEveryRegisteredName) {
  const std::vector<std::string> names = model_type_names();
  for (const char* n : {"lstm", "gru", "mlp", "char_lstm", "char_gru", "gpt", "transformer"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(find_family("tcn"), nullptr);
  const std::vector<std::string> errors = {
      error_of([] { family("tcn"); }),
      error_of([] { make_model(ModelSpec{"tcn", 3, 5, 4, 1, false, 0.f, 1}); }),
      error_of([] { spec_from_json(nlohmann::json{{"type", "tcn"}}); }),
      error_of([] { load_config_text("model:\n  type: tcn\n", "t.yaml", "."); })};
  for (const std::string& e : errors) {
    EXPECT_CONTAINS(e, "tcn");
    for (const std::string& n : names) EXPECT_CONTAINS(e, n);
  }
  for (const std::string& n : names) {
    const ModelFamily& f = family(n);
    EXPECT_NE(std::find(f.names.begin(), f.names.end(), n), f.names.end());
  }
}

// A family's own config check runs at load time, pointing at model.type.
TEST(ModelRegistry, FamilyConfigChecksRunWhenTheConfigLoads) {
  const std::string text = "data:\n  source: text\n  path: words.txt\ntrain:\n  loss: cross_entropy\n";
  EXPECT_EQ(load_config_text(text + "model:\n  type: gru\n", "t.yaml", ".").model.type, "gru");
  const std::string e = error_of([&] { load_config_text(text + "model:\n  type: mlp\n", "t.yaml", "."); });
  EXPECT_CONTAINS(e, "t.yaml:");
  EXPECT_CONTAINS(e, "config key 'model.type' is mlp, but data.source text needs the char LM (lstm or gru)");
}

ModelSpec every_field_set() {
  ModelSpec s;
  s.type = "char_gru";
  s.input_size = 3;
  s.lookback = 17;
  s.hidden = 12;
  s.layers = 3;
  s.bidirectional = true;
  s.dropout = 0.3f;
  s.output_size = 9;
  s.rnn_impl = "onednn";
  s.grad_checkpoint = true;
  s.autotune = true;
  s.vocab_size = 41;
  s.embed_size = 7;
  s.heads = 3;
  s.bias = false;
  s.decay = "matrices";
  s.backend = "reference";
  s.residual_to = "seasonal_naive";
  s.residual_period = 12;
  s.residual_inputs = {2, 0};
  s.quantile_levels = 3;
  s.future_steps = 5;
  s.positions = "sinusoidal";
  s.pooling = "max";
  s.patch_size = 4;
  s.kernel_sizes = {7, 7};
  s.norm = "batch";
  s.reconstruct = true;
  s.mask_fill = "zero";
  s.std_penalty = 0.25f;
  return s;
}

TEST(ModelRegistry, SpecJsonRoundTripsEveryField) {
  const ModelSpec s = every_field_set();
  const nlohmann::json j = spec_to_json(s);
  const ModelSpec back = spec_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_TRUE(back == s) << spec_to_json(back).dump() << " vs " << j.dump();
  EXPECT_EQ(spec_to_json(back), j);
  // Every key is read: without it the field falls back to ModelSpec's default, which differs.
  for (const auto& [key, value] : j.items()) {
    if (key == "type") continue;
    nlohmann::json without = j;
    without.erase(key);
    EXPECT_FALSE(spec_from_json(without) == s) << key << " is not read";
  }
  nlohmann::json bad = j;
  bad["hidden"] = "big";
  EXPECT_CONTAINS(error_of([&] { spec_from_json(bad); }), "model_spec");
  EXPECT_CONTAINS(error_of([] { spec_from_json(nlohmann::json{{"hidden", 3}}); }), "\"type\"");
}

TEST(ModelRegistry, EveryFamilyBuildsFromTheSpecAConfigResolvesTo) {
  int built = 0;
  for (const ModelFamily& f : model_families())
    for (const std::string& name : f.names) {
      Config c;
      c.model.type = name;
      c.model.hidden = 8;  // a multiple of the default model.heads (gpt)
      c.model.embed_size = 4;
      const DataShape d{3, 5, 2, f.is_language_model ? 7 : 0, 0};
      const ModelSpec s = spec_from_config(c, d);
      EXPECT_EQ(s.type, name);
      EXPECT_EQ(&family(s.type), &f);
      EXPECT_TRUE(spec_from_json(spec_to_json(s)) == s) << name;
      std::unique_ptr<Model> m = build_model(s);
      EXPECT_TRUE(m->spec() == s) << name;
      EXPECT_GT(m->params().size(), 0u) << name;
      EXPECT_EQ(m->as_text_generator() != nullptr, f.generates_text) << name;
      Rng rng(1);
      m->init(rng);
      Arena arena;
      std::vector<float> x(2 * 5 * (f.is_language_model ? 1 : 3));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
      const Tensor y = f.is_language_model ? ModelPass(*m, arena, false).forward(Tensor(x.data(), {2, 5}))
                                           : ModelPass(*m, arena, false).forward(Tensor(x.data(), {2, 5, 3}));
      EXPECT_EQ(y.numel(), f.is_language_model ? 2 * 5 * 7 : 2 * 2) << name;
      ++built;
    }
  EXPECT_EQ(built, static_cast<int>(model_type_names().size()));
  // On text data an RNN forecaster's type means the language model with its cell.
  EXPECT_EQ(resolve_type("lstm", DataShape{1, 16, 17, 17, 17}), "char_lstm");
  EXPECT_EQ(resolve_type("gru", DataShape{1, 16, 17, 17, 17}), "char_gru");
  EXPECT_EQ(resolve_type("gru", DataShape{3, 16, 2}), "gru");
  EXPECT_EQ(rnn_cell("char_gru"), RnnCell::gru);
  EXPECT_CONTAINS(error_of([] { rnn_cell("mlp"); }), "no RNN");
}

// --- load_model on a real run ---------------------------------------------------------------

// A small synthetic forecasting run, trained once by the binary.
struct ForecastRun {
  TempDir dir;
  std::string run;
  ForecastRun() {
    run = dir / "run";
    Result r = run_seqtrain("train " + cli::example_config() + cli::kSmall + " --set train.epochs=1 --quiet --out " + run);
    EXPECT_EQ(r.rc, 0) << r.out;
  }
};

ForecastRun& forecast_run() {
  static ForecastRun r;
  return r;
}

// The model's outputs for the first `n` test windows.
std::vector<float> predictions(Model& m, const WindowDataset& split, int64_t n) {
  std::vector<float> x(n * split.x_size());
  split.fill_batch(0, n, x.data(), nullptr);
  Arena arena;
  const Tensor y = ModelPass(m, arena, false).forward(Tensor(x.data(), {n, split.lookback(), split.n_features()}));
  return std::vector<float>(y.f32(), y.f32() + y.numel());
}

// A copy of the run's best checkpoint whose state.json is edited by `edit` and sealed again (as a
// state another version wrote: an unsealed edit is refused, MalformedInputs tests that).
std::string edited_copy(const TempDir& dir, const std::string& from, const std::string& name,
                        const std::function<void(nlohmann::json&)>& edit) {
  const std::string to = dir / name;
  fs::copy(from, to, fs::copy_options::recursive);
  nlohmann::json st = nlohmann::json::parse(cli::slurp(to + "/state.json"));
  edit(st);
  seal_checkpoint_state(st);
  std::ofstream(to + "/state.json") << st.dump(1);
  return to;
}

TEST(LoadModel, RunAndCheckpointDirectoriesRebuildTheModelThatTrained) {
  const std::string& run = forecast_run().run;
  const CheckpointRef ck = open_checkpoint(run);
  const Normalizer norm = Normalizer::from_json(ck.state.at("normalizer"));
  const Dataset data = load_dataset(ck.config, &norm);
  const DataShape shape{data.n_features(), ck.config.data.lookback, ck.config.data.horizon * data.n_targets()};
  LoadedModel from_run = load_model(run, {.shape = shape});
  LoadedModel from_ckpt = load_model(run + "/checkpoints/best", {.shape = shape});
  EXPECT_EQ(from_run.dir, run + "/checkpoints/best");
  EXPECT_EQ(from_run.spec_from, "model_spec") << "the trainer writes the resolved spec into state.json";
  EXPECT_TRUE(from_run.spec == model_spec(ck.config, data));
  // The trainer's test record is the trained (best) model's loss on the test split.
  double test_loss = -1;
  for (const auto& r : cli::read_metrics(run + "/metrics.jsonl"))
    if (r["split"] == "test") test_loss = r["loss"].get<double>();
  ASSERT_GT(test_loss, 0);
  const auto& t = ck.config.train;
  EXPECT_NEAR(evaluate(*from_run.model, data.test, t.loss, t.huber_delta, t.batch_size), test_loss, 1e-6 * (1 + test_loss));
  const std::vector<float> want = predictions(*from_run.model, data.test, 16);
  EXPECT_EQ(predictions(*from_ckpt.model, data.test, 16), want);
  // Built the way the commands did before load_model existed: the same outputs.
  std::unique_ptr<Model> old = make_model(model_spec(ck.config, data));
  load_checkpoint(ck.dir, old->params());
  EXPECT_EQ(predictions(*old, data.test, 16), want);
}

TEST(LoadModel, StateJsonModelSpecIsUsedAndCheckedAgainstTheData) {
  const std::string& run = forecast_run().run;
  TempDir dir;
  const CheckpointRef ck = open_checkpoint(run);
  const Normalizer norm = Normalizer::from_json(ck.state.at("normalizer"));
  const Dataset data = load_dataset(ck.config, &norm);
  const DataShape shape{data.n_features(), ck.config.data.lookback, ck.config.data.horizon * data.n_targets()};
  const ModelSpec spec = model_spec(ck.config, data);
  // With "model_spec" the config is not needed at all.
  const std::string with_spec = edited_copy(dir, ck.dir, "spec", [&](nlohmann::json& st) {
    st["model_spec"] = spec_to_json(spec);
    st.erase("config");
    st.erase("io");
  });
  LoadedModel l = load_model(with_spec);
  EXPECT_EQ(l.spec_from, "model_spec");
  EXPECT_TRUE(l.spec == spec);
  LoadedModel reference = load_model(run, {.shape = shape});
  EXPECT_EQ(predictions(*l.model, data.test, 16), predictions(*reference.model, data.test, 16));
  // The stored spec is what gets built: another hidden size does not fit the weights.
  ModelSpec wider = spec;
  wider.hidden += 4;
  const std::string wrong = edited_copy(dir, ck.dir, "wrong", [&](nlohmann::json& st) { st["model_spec"] = spec_to_json(wider); });
  EXPECT_CONTAINS(error_of([&] { load_model(wrong, {.shape = shape}); }), "rnn.weight_ih_l0");
  // Data of another shape than the stored spec's is refused before anything runs.
  DataShape other = shape;
  other.features += 1;
  const std::string e = error_of([&] { load_model(with_spec, {.shape = other}); });
  EXPECT_CONTAINS(e, "does not fit");
  EXPECT_CONTAINS(e, fmt::format("{} features", shape.features));
  // eval of a checkpoint carrying "model_spec" prints what eval of the run prints.
  const std::string evaluated = edited_copy(dir, ck.dir, "eval", [&](nlohmann::json& st) { st["model_spec"] = spec_to_json(spec); });
  Result a = run_seqtrain("eval " + run), b = run_seqtrain("eval " + evaluated);
  ASSERT_EQ(a.rc, 0) << a.out;
  ASSERT_EQ(b.rc, 0) << b.out;
  // Everything but the first line, which names the checkpoint directory read.
  EXPECT_EQ(a.out.substr(a.out.find('\n')), b.out.substr(b.out.find('\n')));
}

TEST(LoadModel, NeitherARunNorACheckpointIsTheCommandsError) {
  TempDir dir;
  EXPECT_CONTAINS(error_of([&] { load_model(dir / "nothing"); }),
                  "is neither a checkpoint directory, a run directory with checkpoints/best, nor an export");
  EXPECT_CONTAINS(error_of([&] { load_model(dir / "nothing", {.bare_ok = true}); }),
                  "is neither a checkpoint directory (with model.safetensors)");
}

// --- generation through TextGenerator -------------------------------------------------------

// generate's sampling as it was written against CharLm::step before the interface existed,
// with the rule added since: a char vocabulary's <unk> (id 0) is never drawn.
std::string reference_generate(CharLm& m, const Vocab& vocab, const GenerateArgs& a) {
  CharLmState state = m.initial_state();
  std::vector<float> logits(m.vocab_size());
  for (int32_t id : vocab.encode(a.prompt)) m.step(id, state, logits.data());
  Rng rng(a.seed);
  std::vector<int32_t> out;
  const int64_t V = m.vocab_size(), k = a.top_k > 0 ? std::min(a.top_k, V) : V;
  for (int64_t i = 0; i < a.tokens; ++i) {
    logits[Vocab::kUnk] = -std::numeric_limits<float>::infinity();
    std::vector<int32_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return logits[x] > logits[y]; });
    int32_t pick = order[0];
    if (a.temperature > 0) {
      std::vector<double> p(k);
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += p[j] = std::exp((logits[order[j]] - logits[order[0]]) / a.temperature);
      double u = rng.uniform() * sum;
      int64_t j = 0;
      while (j < k - 1 && u >= p[j]) u -= p[j++];
      pick = order[j];
    }
    out.push_back(pick);
    m.step(pick, state, logits.data());
  }
  return a.prompt + vocab.decode(out);
}

// A randomly initialised char GRU saved as a checkpoint with its vocabulary.
struct LmCheckpoint {
  TempDir dir;
  std::string ckpt;
  Vocab vocab = Vocab::chars(U"abcdefgh ");
  std::unique_ptr<CharLm> model;
  LmCheckpoint() {
    ModelSpec s;
    s.type = "char_gru";
    s.vocab_size = vocab.size();
    s.embed_size = 5;
    s.hidden = 12;
    s.layers = 2;
    model = std::make_unique<CharLm>(s);
    Rng rng(11);
    model->init(rng);
    ckpt = dir / "ckpt";
    CheckpointData data;
    data.params = &model->params();
    data.state = nlohmann::json{{"step", 0}};
    save_checkpoint(ckpt, data);
    vocab.save(ckpt + "/vocab.json");
  }
};

TEST(TextGeneration, InterfaceGivesTheTextOfTheDirectStepLoop) {
  LmCheckpoint lm;
  LoadedGenerator l = load_generator(lm.ckpt);
  EXPECT_EQ(l.model->spec().type, "char_gru");
  EXPECT_EQ(load_model(lm.ckpt, {.from_weights = true}).spec_from, "weights");
  GenerateArgs a;
  a.prompt = "abc ha";
  a.tokens = 60;
  for (double temperature : {0.0, 0.7, 1.5})
    for (int64_t top_k : {0, 3}) {
      a.temperature = temperature;
      a.top_k = top_k;
      a.seed = 5 + top_k;
      const std::string want = reference_generate(*lm.model, lm.vocab, a);
      EXPECT_EQ(generate_text(*l.generator, l.vocab, a), want) << temperature << " " << top_k;
      EXPECT_EQ(generate_text(*l.model, l.vocab, a), want);
    }
  // A checkpoint with "model_spec" generates the same text, and so does the command.
  TempDir dir;
  const std::string with_spec = edited_copy(dir, lm.ckpt, "spec", [&](nlohmann::json& st) {
    st["model_spec"] = spec_to_json(lm.model->spec());
  });
  EXPECT_EQ(load_model(with_spec, {.from_weights = true}).spec_from, "model_spec");
  a.temperature = 0.9;
  a.top_k = 0;
  a.seed = 3;
  a.tokens = 25;
  const std::string want = reference_generate(*lm.model, lm.vocab, a);
  EXPECT_EQ(generate_text(*load_generator(with_spec).generator, lm.vocab, a), want);
  Result r = run_seqtrain("generate " + with_spec + " --prompt 'abc ha' --tokens 25 --temperature 0.9 --seed 3");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, want + "\n");
  // A state made by another model is refused.
  struct Foreign : GenState {} foreign;
  std::vector<float> logits(lm.vocab.size());
  EXPECT_CONTAINS(error_of([&] { l.generator->next_logits(foreign, 1, logits.data()); }), "begin()");
}

TEST(TextGeneration, GenerateOnAForecasterRunNamesTheModelType) {
  const std::string& run = forecast_run().run;
  const std::string e = error_of([&] { load_generator(run); });
  EXPECT_CONTAINS(e, "model.type 'lstm'");
  EXPECT_CONTAINS(e, "does not generate text");
  EXPECT_CONTAINS(e, "char_lstm, char_gru or gpt");
  Result r = run_seqtrain("generate " + run + " --prompt ab");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "model.type 'lstm'");
  EXPECT_CONTAINS(r.out, "does not generate text");
  // The same from a checkpoint that records its spec.
  TempDir dir;
  const CheckpointRef ck = open_checkpoint(run);
  const std::string with_spec = edited_copy(dir, ck.dir, "spec", [&](nlohmann::json& st) {
    st["model_spec"] = spec_to_json(load_model(run).spec);
  });
  EXPECT_CONTAINS(error_of([&] { load_generator(with_spec); }), "model.type 'lstm'");
  std::unique_ptr<Model> mlp = make_model(ModelSpec{"mlp", 3, 5, 4, 1, false, 0.f, 1});
  EXPECT_CONTAINS(error_of([&] { text_generator(*mlp); }), "model.type 'mlp'");
}

}  // namespace
}  // namespace seqtrain::testing
