// `seqtrain export` (cli/export.h): a forecaster and a char LM trained by the binary, exported,
// load in PyTorch through seqtrain_torch.load_exported and give seqtrain's outputs (within
// 1e-5; tests/py/export_check.py); so does every registered family built from a spec; the gpt
// family's ModelSpec names load on the Python side. --overwrite replaces only an earlier export,
// and bad input (no checkpoint, a damaged one, an existing or unwritable --out) is exit code 2
// with nothing left behind.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/export.h"
#include "core/arena.h"
#include "model_pass.h"
#include "models/registry.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/load_model.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;
using cli::slurp;

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

// A tiny run trained once by the binary and shared by the tests below.
struct TrainedRun {
  TempDir dir;
  std::string run;
  explicit TrainedRun(const std::string& args) {
    run = dir / "run";
    Result r = run_seqtrain("train " + args + " --quiet --out " + run);
    EXPECT_EQ(r.rc, 0) << r.out;
  }
};

const TrainedRun& forecast_run() {
  static TrainedRun r(cli::example_config() + cli::kSmall + " --set train.epochs=1");
  return r;
}

// A char LM on a small text of words (17 distinct characters with <unk>).
std::string word_text(int words) {
  const char* w[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to"};
  std::string out;
  for (int i = 0; i < words; ++i) out += std::string(w[(i * 7 + i / 3) % 10]) + (i % 13 == 12 ? "\n" : " ");
  return out;
}

std::string text_config(const TempDir& dir, const std::string& text_path) {
  return write_file(dir, "text.yaml",
                    "data:\n  source: text\n  path: " + text_path +
                        "\n  block_size: 12\n  stride: 6\n  workers: 0\n"
                        "model:\n  hidden: 16\n  embed_size: 8\n"
                        "train:\n  epochs: 1\n  batch_size: 16\n  loss: cross_entropy\n"
                        "runtime:\n  threads: 1\n  deterministic: true\n");
}

struct LmRun {
  TempDir files;
  std::unique_ptr<TrainedRun> trained;
  LmRun() {
    trained = std::make_unique<TrainedRun>(text_config(files, write_file(files, "words.txt", word_text(600))));
  }
};

const std::string& lm_run() {
  static LmRun r;
  return r.trained->run;
}

// Feeds the same inputs to `m` (seqtrain) and to load_exported(out) (PyTorch): they must agree.
// Language models get token ids [2, T], the others windows [2, lookback, input_size].
void expect_pytorch_agrees(Model& m, const std::string& out) {
  SEQTRAIN_REQUIRE_TORCH();
  const ModelSpec& s = m.spec();
  const bool ids = family(s.type).is_language_model;
  const int64_t B = 2, T = std::min<int64_t>(s.lookback, 8);
  const std::vector<int64_t> shape =
      ids ? std::vector<int64_t>{B, T} : std::vector<int64_t>{B, s.lookback + s.future_steps, s.input_size};
  Rng rng(5);
  std::vector<float> x = randn(rng, shape[0] * shape[1] * (ids ? 1 : shape[2]));
  std::vector<int64_t> x_ids(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = ids ? static_cast<float>(x_ids[i] = static_cast<int64_t>(i * 5 % s.vocab_size)) : x[i];
  Arena arena;
  const Tensor y = ModelPass(m, arena, false).forward(Tensor(x.data(), shape));
  TempDir io;
  if (ids) write_npy(io / "x.npy", x_ids, shape);
  else write_npy(io / "x.npy", x, shape);
  write_npy(io / "y.npy", y.f32(), {y.numel()});
  EXPECT_EQ(run_python("export_check.py", out + " " + (io / "x.npy") + " " + (io / "y.npy")), 0)
      << s.type << ": PyTorch's outputs differ from seqtrain's (report above)";
}

// A transformer export gives seqtrain's outputs on a padded batch: load_exported's module reads
// the same lengths (python/seqtrain_torch/transformer.py), padding masked the same way.
TEST(Export, TransformerExportAgreesOnAPaddedBatch) {
  SEQTRAIN_REQUIRE_TORCH();
  ModelSpec s;
  s.type = "transformer";
  s.input_size = 3;
  s.lookback = 8;
  s.hidden = 8;
  s.layers = 2;
  s.heads = 2;
  s.output_size = 2;
  s.pooling = "mean";
  s.patch_size = 2;
  std::unique_ptr<Model> m = build_model(s);
  Rng rng(4);
  m->init(rng);
  TempDir dir;
  CheckpointData data;
  data.params = &m->params();
  data.state = {{"tag", "best"}, {"model_spec", spec_to_json(s)}};
  save_checkpoint(dir / "ckpt", data);
  export_model({.checkpoint = dir / "ckpt", .out = dir / "out"});
  std::vector<float> x = randn(rng, 3 * 8 * 3);
  std::vector<int64_t> lengths{8, 3, 6};
  Batch batch = batch_of(Tensor(x.data(), {3, 8, 3}));
  batch.lengths = Tensor(lengths.data(), {3}, DType::i64);
  Arena arena;
  StepContext ctx(arena);
  const Tensor y = m->forward(batch, ctx);
  write_npy(dir / "x.npy", x, {3, 8, 3});
  write_npy(dir / "y.npy", y.f32(), {y.numel()});
  write_npy(dir / "lengths.npy", lengths, {3});
  EXPECT_EQ(run_python("export_check.py", (dir / "out") + " " + (dir / "x.npy") + " " + (dir / "y.npy") + " " +
                                              (dir / "lengths.npy")),
            0);
}

// Files in `dir` whose name starts with `prefix` (temporaries an export must not leave).
int count_named(const std::string& dir, const std::string& prefix) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

TEST(Export, TrainedForecasterLoadsInPyTorchWithTheSamePredictions) {
  const std::string& run = forecast_run().run;
  TempDir dir;
  const std::string out = dir / "exported";
  Result r = run_seqtrain("export " + run + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "exported: " + out);
  EXPECT_EQ(slurp(out + "/model.safetensors"), slurp(run + "/checkpoints/best/model.safetensors"));
  LoadedModel m = load_model(run);
  const nlohmann::json c = read_json(out + "/config.json");
  EXPECT_EQ(c["format"], "seqtrain.export");
  EXPECT_EQ(c["model_spec"], spec_to_json(m.spec));
  EXPECT_EQ(c["torch"]["type"], "lstm");
  EXPECT_EQ(c["torch"]["hidden"], 16);
  EXPECT_FALSE(c["torch"].contains("rnn_impl")) << "how seqtrain computes is no PyTorch argument";
  EXPECT_EQ(c["data"]["normalizer"], m.state["normalizer"]);
  EXPECT_FALSE(fs::exists(out + "/vocab.json"));
  EXPECT_CONTAINS(slurp(out + "/README.md"), "seqtrain_torch.load_exported");
  EXPECT_EQ(count_named(dir.path.string(), ".tmp-export"), 0);
  expect_pytorch_agrees(*m.model, out);
}

// model.residual_to: the PyTorch mirror adds the same window values (seasonal, with the
// targets not first among the inputs and the season features after them).
TEST(Export, ResidualForecastersLoadInPyTorchWithTheSamePredictions) {
  for (const char* type : {"gru", "mlp"}) {
    // The mlp also forecasts quantiles: the baseline enters the first level, the rest build on it;
    // both read the known future of current and a season's phase.
    TrainedRun trained(cli::example_config() + cli::kSmall + " --set train.epochs=1 --set model.type=" + type +
                       " --set data.features=[current,voltage,soc] --set data.seasons=[6,10]"
                       " --set model.residual_to=seasonal_naive --set data.future_features=[current,season6_sin]" +
                       (std::string(type) == "mlp" ? " --set train.loss=quantile --set train.quantiles=[0.2,0.5,0.7,0.95]" : ""));
    TempDir dir;
    const std::string out = dir / "exported";
    Result r = run_seqtrain("export " + trained.run + " --out " + out);
    ASSERT_EQ(r.rc, 0) << r.out;
    LoadedModel m = load_model(trained.run);
    EXPECT_EQ(m.spec.residual_to, "seasonal_naive");
    EXPECT_EQ(m.spec.residual_period, 10);
    EXPECT_EQ(m.spec.residual_inputs, std::vector<int64_t>{1});
    EXPECT_EQ(m.spec.input_size, 7) << "3 columns and the sine and cosine of 2 seasons";
    EXPECT_EQ(m.spec.quantile_levels, std::string(type) == "mlp" ? 4 : 1);
    EXPECT_EQ(m.spec.future_steps, 4);
    expect_pytorch_agrees(*m.model, out);
  }
}

TEST(Export, TrainedCharLmLoadsInPyTorchWithTheSameLogits) {
  const std::string& run = lm_run();
  TempDir dir;
  const std::string out = dir / "lm";
  Result r = run_seqtrain("export " + run + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "vocab.json");
  LoadedModel m = load_model(run);
  EXPECT_EQ(m.spec.type, "char_lstm");
  EXPECT_EQ(read_json(out + "/vocab.json"), m.state["vocab"]);
  EXPECT_EQ(read_json(out + "/config.json")["torch"]["vocab_size"], m.spec.vocab_size);
  EXPECT_FALSE(read_json(out + "/config.json").contains("data")) << "a text run has no normalization to export";
  EXPECT_EQ(slurp(out + "/model.safetensors"), slurp(m.dir + "/model.safetensors"));
  // The export is a directory generate reads too (weights + vocab.json).
  EXPECT_EQ(run_seqtrain("generate " + out + " --prompt 'the ' --tokens 5 --temperature 0").out,
            run_seqtrain("generate " + run + " --prompt 'the ' --tokens 5 --temperature 0").out);
  expect_pytorch_agrees(*m.model, out);
}

// Every family that generates generates from its export as from its run (one loader for runs,
// checkpoints and exports: load_model), and an export whose weights changed is refused.
TEST(Export, EveryGeneratingFamilyGeneratesFromItsExport) {
  TempDir files;
  const std::string config = text_config(files, write_file(files, "words.txt", word_text(300)));
  for (const char* type : {"lstm", "gru", "gpt"}) {
    TempDir dir;
    const std::string run = dir / "run", out = dir / "exported";
    Result t = run_seqtrain("train " + config + " --quiet --out " + run + " --set model.type=" + type +
                            " --set model.heads=2 --set train.max_steps=3");
    ASSERT_EQ(t.rc, 0) << type << t.out;
    ASSERT_EQ(run_seqtrain("export " + run + " --out " + out).rc, 0) << type;
    const std::string args = " --prompt 'the cat' --tokens 12 --temperature 0.8 --seed 3";
    Result from_export = run_seqtrain("generate " + out + args), from_run = run_seqtrain("generate " + run + args);
    EXPECT_EQ(from_export.rc, 0) << type << ": " << from_export.out;
    EXPECT_EQ(from_export.out, from_run.out) << type;
    Result again = run_seqtrain("export " + out + " --out " + (dir / "again"));
    EXPECT_EQ(again.rc, 2) << again.out;
    EXPECT_CONTAINS(again.out, "is already an export");
    EXPECT_FALSE(fs::exists(dir / "again"));
    // A flipped byte in the exported weights is named, not generated from.
    std::string w = slurp(out + "/model.safetensors");
    w[w.size() - 3] ^= 0x40;
    std::ofstream(out + "/model.safetensors", std::ios::binary) << w;
    Result bad = run_seqtrain("generate " + out + args);
    EXPECT_EQ(bad.rc, 2) << type << bad.out;
    EXPECT_CONTAINS(bad.out, "does not match the checksum its export recorded");
  }
}

// Every registered family (gpt included once its C++ model is registered), from a spec.
TEST(Export, EveryRegisteredFamilyLoadsStrictInPyTorch) {
  for (const std::string& type : model_type_names()) {
    ModelSpec s;
    s.type = type;
    s.input_size = 3;
    s.lookback = 6;
    s.hidden = 8;
    s.layers = 2;
    s.heads = 2;
    s.output_size = 2;
    s.embed_size = 5;
    s.vocab_size = family(type).is_language_model ? 11 : 0;
    s.bidirectional = type == "gru";  // one bidirectional stack among the forecasters
    std::unique_ptr<Model> m = build_model(s);
    Rng rng(3);
    m->init(rng);
    TempDir dir;
    CheckpointData data;
    data.params = &m->params();
    data.state = {{"tag", "best"}, {"model_spec", spec_to_json(s)}};
    save_checkpoint(dir / "ckpt", data);
    const ExportResult r = export_model({.checkpoint = dir / "ckpt", .out = dir / "out"});
    EXPECT_EQ(r.files.front(), "model.safetensors") << type;
    expect_pytorch_agrees(*m, dir / "out");
  }
}

TEST(Export, GptModelSpecNamesLoadInPyTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  TempDir dir;
  EXPECT_EQ(run_python("export_check.py", "--gpt " + (dir / "gpt")), 0) << "(report above)";
}

TEST(Export, OverwriteReplacesOnlyAnEarlierExport) {
  TempDir dir;
  const std::string out = dir / "exported";
  ASSERT_EQ(run_seqtrain("export " + forecast_run().run + " --out " + out).rc, 0);
  const std::string before = slurp(out + "/config.json");
  Result again = run_seqtrain("export " + lm_run() + " --out " + out);
  EXPECT_EQ(again.rc, 2) << again.out;
  EXPECT_CONTAINS(again.out, "'" + out + "' already exists; pass --overwrite");
  EXPECT_EQ(slurp(out + "/config.json"), before);
  Result replaced = run_seqtrain("export " + lm_run() + " --out " + out + " --overwrite");
  ASSERT_EQ(replaced.rc, 0) << replaced.out;
  EXPECT_TRUE(fs::exists(out + "/vocab.json"));
  EXPECT_EQ(count_named(dir.path.string(), "."), 0) << "no .tmp-export-* or .old-* left";
  // A directory that is not an export is someone's data: --overwrite does not delete it.
  const std::string mine = dir / "mine";
  fs::create_directories(mine);
  write_file(dir, "mine/notes.txt", "keep me");
  Result refused = run_seqtrain("export " + lm_run() + " --out " + mine + " --overwrite");
  EXPECT_EQ(refused.rc, 2) << refused.out;
  EXPECT_CONTAINS(refused.out, "is not a seqtrain export");
  EXPECT_EQ(slurp(mine + "/notes.txt"), "keep me");
}

TEST(Export, BadInputIsExitCodeTwoAndLeavesNothingBehind) {
  TempDir dir;
  const std::string out = dir / "out";
  Result none = run_seqtrain("export " + (dir / "nothing") + " --out " + out);
  EXPECT_EQ(none.rc, 2) << none.out;
  EXPECT_CONTAINS(none.out, "is neither a checkpoint directory, a run directory with checkpoints/best, nor an export");
  // A damaged checkpoint: its weights fail their checksum.
  const std::string damaged = dir / "damaged";
  fs::copy(forecast_run().run + "/checkpoints/best", damaged, fs::copy_options::recursive);
  std::string bytes = slurp(damaged + "/model.safetensors");
  bytes.back() ^= 1;
  write_file(dir, "damaged/model.safetensors", bytes);
  Result bad = run_seqtrain("export " + damaged + " --out " + out);
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_CONTAINS(bad.out, "fails its checksum");
  // A vocabulary that does not parse fails after the weights and config.json are written.
  const std::string bad_vocab = dir / "bad_vocab";
  fs::copy(load_model(lm_run()).dir, bad_vocab, fs::copy_options::recursive);
  nlohmann::json st = read_json(bad_vocab + "/state.json");
  st["vocab"]["kind"] = "words";
  seal_checkpoint_state(st);
  write_file(dir, "bad_vocab/state.json", st.dump());
  Result mid = run_seqtrain("export " + bad_vocab + " --out " + out);
  EXPECT_EQ(mid.rc, 2) << mid.out;
  EXPECT_CONTAINS(mid.out, "vocab");
  // An --out under a regular file cannot be created (permissions would not stop root).
  write_file(dir, "file", "x");
  Result unwritable = run_seqtrain("export " + forecast_run().run + " --out " + (dir / "file/sub/out"));
  EXPECT_EQ(unwritable.rc, 2) << unwritable.out;
  EXPECT_CONTAINS(unwritable.out, "cannot create");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(count_named(dir.path.string(), "."), 0) << "no temporary left";
  // A failed --overwrite keeps the previous export whole.
  ASSERT_EQ(run_seqtrain("export " + forecast_run().run + " --out " + out).rc, 0);
  const std::string before = slurp(out + "/config.json");
  EXPECT_EQ(run_seqtrain("export " + bad_vocab + " --out " + out + " --overwrite").rc, 2);
  EXPECT_EQ(slurp(out + "/config.json"), before);
  EXPECT_EQ(count_named(dir.path.string(), "."), 0);
}

// --- resume reads the checkpoint's spec as load_model does --------------------------------------

TEST(Resume, RefusesACheckpointWhoseModelTheDataNoLongerGives) {
  TempDir dir;
  const std::string text = write_file(dir, "words.txt", word_text(400));
  TrainedRun r(text_config(dir, text));
  const int64_t vocab = load_model(r.run).spec.vocab_size;
  // New characters grow the vocabulary: the config is unchanged (its check passes), the model
  // it builds on this data is not.
  write_file(dir, "words.txt", word_text(400) + "XYZ\n");
  Result refused = run_seqtrain("train --resume " + r.run + " --set train.epochs=2 --quiet");
  EXPECT_EQ(refused.rc, 2) << refused.out;
  EXPECT_CONTAINS(refused.out, fmt::format("vocab_size is {} in the checkpoint but {} now", vocab, vocab + 3));
  EXPECT_CONTAINS(refused.out, r.run + "/config.yaml");
  EXPECT_CONTAINS(refused.out, "start a new run with another --out");
  // With the original data the run resumes as before.
  write_file(dir, "words.txt", word_text(400));
  Result resumed = run_seqtrain("train --resume " + r.run + " --set train.epochs=2 --quiet");
  EXPECT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_EQ(read_checkpoint_state(r.run + "/checkpoints/last").at("epoch"), 2);
}

}  // namespace
}  // namespace seqtrain::testing
