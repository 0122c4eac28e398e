// model.init_from with load options (train/init_from.h): a prefix map fills exactly the mapped
// tensors and leaves the rest bit for bit; the skip list; strict mode; every error names what
// the user has to change; the config keys; and a run that warm-starts its RNN from another
// run with a different head.
#include <gtest/gtest.h>

#include <cstring>

#include "config/config.h"
#include "io/safetensors.h"
#include "test_trainer_util.h"
#include "train/checkpoint.h"
#include "train/init_from.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

// A store with the given (name, shape) entries, element i of the whole buffer = base + i.
std::unique_ptr<ParamStore> store(const std::vector<std::pair<std::string, Shape>>& entries, float base) {
  auto ps = std::make_unique<ParamStore>();
  for (const auto& [n, s] : entries) ps->add(n, s);
  ps->finalize();
  for (size_t i = 0; i < ps->size(); ++i) ps->params()[i] = base + static_cast<float>(i);
  return ps;
}

std::vector<float> values(ParamStore& ps, const std::string& name) {
  const ParamEntry* e = ps.find(name);
  EXPECT_NE(e, nullptr) << name;
  const float* p = ps.params() + e->offset;
  return std::vector<float>(p, p + numel_of(e->shape));
}

// The pretrained run: an encoder and a one-output head.
struct Source {
  TempDir dir;
  std::string file;
  std::unique_ptr<ParamStore> ps;
  Source() {
    ps = store({{"encoder.weight", {4, 3}}, {"encoder.bias", {4}}, {"head.weight", {1, 4}}, {"head.bias", {1}}}, 100.f);
    file = dir / "pretrained.safetensors";
    save_params(file, *ps);
  }
};

// The new model: the same encoder under rnn.*, a two-output head.
std::unique_ptr<ParamStore> target_model() {
  return store({{"rnn.weight", {4, 3}}, {"rnn.bias", {4}}, {"head.weight", {2, 4}}, {"head.bias", {2}}}, -1.f);
}

TEST(InitFrom, PrefixMapFillsExactlyTheMappedTensors) {
  Source src;
  auto model = target_model();
  const auto head_w = values(*model, "head.weight"), head_b = values(*model, "head.bias");
  const InitFromReport r = init_from(src.file, *model, InitFromOptions{{"encoder.=rnn."}, {"head."}, true});
  EXPECT_EQ(r.filled, (std::vector<std::string>{"rnn.weight", "rnn.bias"}));
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"head.weight", "head.bias"}));
  EXPECT_EQ(values(*model, "rnn.weight"), values(*src.ps, "encoder.weight"));
  EXPECT_EQ(values(*model, "rnn.bias"), values(*src.ps, "encoder.bias"));
  // Left at their initialisation, bit for bit.
  const auto hw = values(*model, "head.weight"), hb = values(*model, "head.bias");
  EXPECT_EQ(std::memcmp(hw.data(), head_w.data(), hw.size() * 4), 0);
  EXPECT_EQ(std::memcmp(hb.data(), head_b.data(), hb.size() * 4), 0);
}

TEST(InitFrom, SkipLeavesNamedTensorsAndFillsTheRest) {
  Source src;
  auto model = store({{"encoder.weight", {4, 3}}, {"encoder.bias", {4}}, {"head.weight", {1, 4}}, {"head.bias", {1}}}, -1.f);
  const auto keep = values(*model, "head.bias");
  const InitFromReport r = init_from(src.file, *model, InitFromOptions{{}, {"head.bias"}, true});
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"head.bias"}));
  EXPECT_EQ(values(*model, "head.bias"), keep);
  EXPECT_EQ(values(*model, "head.weight"), values(*src.ps, "head.weight"));
  EXPECT_EQ(values(*model, "encoder.weight"), values(*src.ps, "encoder.weight"));
}

TEST(InitFrom, ReadsACheckpointDirectoryAndVerifiesIt) {
  Source src;
  const std::string ckpt = src.dir / "ckpt";
  save_checkpoint(ckpt, CheckpointData{src.ps.get(), OptimizerState{}, nlohmann::json::object(), {}});
  auto model = target_model();
  init_from(ckpt, *model, InitFromOptions{{"encoder.=rnn."}, {"head."}, true});
  EXPECT_EQ(values(*model, "rnn.weight"), values(*src.ps, "encoder.weight"));
  // A damaged file is refused before anything is read.
  std::string bytes = cli::slurp(ckpt + "/model.safetensors");
  bytes[bytes.size() - 2] ^= 0x11;
  std::ofstream(ckpt + "/model.safetensors", std::ios::binary) << bytes;
  EXPECT_CONTAINS(error_of([&] { init_from(ckpt, *model, InitFromOptions{{"encoder.=rnn."}, {"head."}, true}); }),
                  "checksum");
}

TEST(InitFrom, NonStrictReportsWhatItLeft) {
  Source src;
  auto model = target_model();
  const InitFromReport r = init_from(src.file, *model, InitFromOptions{{}, {"head."}, false});
  EXPECT_TRUE(r.filled.empty());
  EXPECT_EQ(r.unfilled, (std::vector<std::string>{"rnn.weight", "rnn.bias"}));
  EXPECT_EQ(r.unused, (std::vector<std::string>{"encoder.weight", "encoder.bias"}));
}

TEST(InitFromErrors, EachNamesWhatToChangeAndLeavesTheModelUntouched) {
  Source src;
  auto model = target_model();
  const std::vector<float> before(model->params(), model->params() + model->size());
  auto err = [&](InitFromOptions o) { return error_of([&] { init_from(src.file, *model, o); }); };

  // A map entry that matches nothing: the entry and the tensors there are.
  const std::string nomatch = err({{"decoder.=rnn."}, {"head."}, true});
  EXPECT_CONTAINS(nomatch, "model.init_from_map entry 'decoder.=rnn.'");
  EXPECT_CONTAINS(nomatch, "encoder.weight, encoder.bias, head.weight, head.bias");
  // Strict: a model tensor nothing fills.
  auto wider = store({{"rnn.weight", {4, 3}}, {"rnn.bias", {4}}, {"rnn.extra", {3}}, {"head.weight", {2, 4}}}, -1.f);
  const std::string unfilled =
      error_of([&] { init_from(src.file, *wider, InitFromOptions{{"encoder.=rnn."}, {"head."}, true}); });
  EXPECT_CONTAINS(unfilled, "model's 'rnn.extra'");
  EXPECT_CONTAINS(unfilled, "model.init_from_skip");
  // Strict: a source tensor the model lacks.
  const std::string unused = err({{}, {"head."}, true});
  EXPECT_CONTAINS(unused, "tensor 'encoder.weight'");
  EXPECT_CONTAINS(unused, "not a tensor of the model");
  // A shape mismatch: the tensor and both shapes.
  const std::string shape = err({{"encoder.=rnn."}, {}, true});
  EXPECT_CONTAINS(shape, "'head.weight'");
  EXPECT_CONTAINS(shape, "[1, 4]");
  EXPECT_CONTAINS(shape, "[2, 4]");
  // A skip entry that names nothing.
  EXPECT_CONTAINS(err({{"encoder.=rnn."}, {"haed."}, true}), "model.init_from_skip entry 'haed.'");
  // Two source tensors onto one model tensor.
  EXPECT_CONTAINS(err({{"encoder.bias=rnn.bias", "head.bias=rnn.bias"}, {"head.weight"}, false}), "maps both");

  const std::vector<float> after(model->params(), model->params() + model->size());
  EXPECT_EQ(after, before);
}

TEST(InitFromConfig, KeysParseValidateAndRoundTrip) {
  TempDir dir;
  const std::string ok = write_file(dir, "ok.yaml",
                                    "model:\n  init_from: ckpt\n  init_from_map: {\"encoder.\": \"rnn.\", \"enc2.\": \"\"}\n"
                                    "  init_from_skip: [head.]\n  init_from_strict: false\n");
  const Config c = load_config(ok);
  EXPECT_EQ(c.model.init_from_map, (std::vector<std::string>{"encoder.=rnn.", "enc2.="}));
  EXPECT_EQ(c.model.init_from_skip, (std::vector<std::string>{"head."}));
  EXPECT_FALSE(c.model.init_from_strict);
  EXPECT_EQ(load_config_text(to_yaml(c), "x", "/"), c);
  const Config o = load_config(ok, {"model.init_from_map=[a.=b., c.=d.]"});
  EXPECT_EQ(o.model.init_from_map, (std::vector<std::string>{"a.=b.", "c.=d."}));

  const std::string bad = error_of([&] {
    load_config(write_file(dir, "bad.yaml", "model:\n  init_from: ckpt\n  init_from_map: [\"encoder.\"]\n"));
  });
  EXPECT_CONTAINS(bad, "bad.yaml:3:");
  EXPECT_CONTAINS(bad, "'model.init_from_map'");
  EXPECT_CONTAINS(bad, "from=to");
  EXPECT_CONTAINS(error_of([&] { load_config(ok, {"model.init_from_map=[a.=b., a.=c.]"}); }), "twice");
  EXPECT_CONTAINS(error_of([&] { load_config(ok, {"model.init_from_skip=[x, x]"}); }), "'model.init_from_skip'");
  EXPECT_CONTAINS(error_of([&] { load_config("", {"model.init_from_skip=[head.]"}); }),
                  "config key 'model.init_from_skip' is set but model.init_from is empty");
}

// A run whose horizon differs from the pretrained one's: its RNN starts from the other run's,
// its head (another shape) is skipped; without the skip the shapes are named.
TEST(InitFromTrain, WarmStartsTheRnnOfAModelWithAnotherHead) {
  TempDir dir;
  using namespace cli;
  const std::string base = "train " + example_config() + kSmall + " --set train.epochs=1 --quiet";
  ASSERT_EQ(run_seqtrain(base + " --out " + (dir / "pre")).rc, 0);
  const std::string from = " --set model.init_from=" + (dir / "pre/checkpoints/best") + " --set data.horizon=2";
  Result refused = run_seqtrain(base + from + " --out " + (dir / "a"));
  EXPECT_EQ(refused.rc, 2);
  EXPECT_CONTAINS(refused.out, "head.weight");
  EXPECT_CONTAINS(refused.out, "[4, 16]");
  Result ok = run_seqtrain(base + from + " --set model.init_from_skip=[head.] --out " +
                           (dir / "b"));
  ASSERT_EQ(ok.rc, 0) << ok.out;
}

}  // namespace
}  // namespace seqtrain::testing
