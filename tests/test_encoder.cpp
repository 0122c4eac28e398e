// Encoders between runs (models/encoder.h): `seqtrain export RUN --encoder FILE` writes the
// encoder's tensors alone with metadata, which python/seqtrain_torch's load_encoder loads strictly
// and embeds exactly as `seqtrain embed` does (tests/py/encoder_check.py, within 1e-5), for an lstm
// and a transformer classifier trained by the binary on a small variable-length npy set;
// model.encoder_from (a run directory or that file) fills a new model's encoder with those weights
// and leaves its head as a fresh run's; and each refusal (another shape, another family, a source
// without an encoder, both model.encoder_from and model.init_from, embed of an mlp, export
// --encoder of a gpt) exits non-zero naming what is wrong, with nothing written.
#include <gtest/gtest.h>

#include "cli/export.h"
#include "encoder_checks.h"
#include "io/safetensors.h"
#include "models/encoder.h"
#include "models/registry.h"
#include "npy_class_set.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/encoder_from.h"
#include "train/load_model.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;

constexpr int64_t kT = kSetT, kF = kSetF;

const NpyClassSet& set_data() { return npy_class_set(); }

// A config training `model` (yaml lines under model:) on the set for two quick epochs.
std::string set_config(const TempDir& dir, const std::string& name, const std::string& model) {
  return write_file(dir, name + ".yaml",
                    npy_class_set_yaml() + "model:\n" + model +
                        "train:\n  task: classify\n  loss: cross_entropy\n  epochs: 2\n  batch_size: 16\n"
                        "  optimizer:\n    lr: 0.01\n" + "runtime:\n  threads: 1\n  deterministic: true\n");
}

const std::string kLstm = "  type: lstm\n  hidden: 8\n  pooling: mean\n";
const std::string kTransformer =
    "  type: transformer\n  hidden: 8\n  heads: 2\n  layers: 1\n  pooling: cls\n  patch_size: 2\n";

struct TrainedRun : ExportedRun {
  TrainedRun(const std::string& name, const std::string& model)
      : ExportedRun([&](const TempDir& dir) { return set_config(dir, name, model); }) {}
};

const TrainedRun& lstm_run() {
  static TrainedRun r("lstm", kLstm);
  return r;
}
const TrainedRun& transformer_run() {
  static TrainedRun r("transformer", kTransformer);
  return r;
}

TEST(EncoderExport, LstmClassifiersEncoderLoadsInPyTorchAndEmbedsAsSeqtrainEmbed) {
  expect_encoder_round_trip(lstm_run(), "lstm", "mean");
}

TEST(EncoderExport, TransformerClassifiersEncoderLoadsInPyTorchAndEmbedsAsSeqtrainEmbed) {
  expect_encoder_round_trip(transformer_run(), "transformer", "cls");
}

// encoder_from, the function the training loop calls after the model's initialisation: from the
// run and from its exported file alike, under a head of another size (5 outputs, the source's 3).
TEST(EncoderFrom, FillsTheEncoderFromARunOrItsExportAndLeavesTheHeadFresh) {
  for (const TrainedRun* r : {&lstm_run(), &transformer_run()}) {
    const SafetensorsFile exported = read_safetensors(r->encoder);
    for (const std::string& source : {r->run, r->encoder}) {
      ModelSpec s = load_model(r->run).spec;
      s.output_size = 5;
      auto fresh = build_model(s), m = build_model(s);
      Rng a(7), b(7);
      fresh->init(a);
      m->init(b);
      const EncoderFromReport rep = encoder_from(source, *m);
      EXPECT_EQ(rep.fresh, (std::vector<std::string>{"head.weight", "head.bias"})) << source;
      EXPECT_EQ(rep.filled.size(), exported.tensors.size()) << source;
      EXPECT_EQ(rep.family, s.type);
      expect_encoder_and_fresh_head(m->params(), exported, fresh->params());
    }
  }
}

// Through `seqtrain train`: the run's weights before its first update are the exported encoder
// and a fresh run's head. One SGD step at a negligible rate leaves them as they started.
TEST(EncoderFrom, ATrainingRunStartsFromTheEncoderWithTheHeadOfAFreshRun) {
  const TrainedRun& src = lstm_run();
  TempDir dir;
  const std::string one_step = " --set train.max_steps=1 --set train.optimizer.name=sgd --set train.optimizer.lr=1e-12";
  Result plain = run_seqtrain("train " + src.config + one_step + " --quiet --out " + (dir / "plain"));
  ASSERT_EQ(plain.rc, 0) << plain.out;
  const SafetensorsFile exported = read_safetensors(src.encoder);
  const SafetensorsFile fresh = read_safetensors(dir / "plain/checkpoints/last/model.safetensors");
  for (const std::string& source : {src.run, src.encoder}) {
    const std::string run = dir / ("from_" + std::to_string(source.size()));
    Result r = run_seqtrain("train " + src.config + one_step + " --set model.encoder_from=" + source + " --out " + run);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_CONTAINS(r.out, "model.encoder_from: 4 lstm encoder tensors");
    EXPECT_CONTAINS(r.out, "fresh: head.weight, head.bias");
    const SafetensorsFile got = read_safetensors(run + "/checkpoints/last/model.safetensors");
    for (const auto& t : got.tensors) {
      const std::vector<float> v = t.to_f32();
      const std::vector<float> want = is_encoder_tensor(t.name) ? exported.at(t.name).to_f32()
                                                                 : fresh.at(t.name).to_f32();
      EXPECT_LT(rel_err(v, want), 1e-6) << source << ": " << t.name;
      if (is_encoder_tensor(t.name)) {
        EXPECT_GT(rel_err(fresh.at(t.name).to_f32(), want), 1e-3) << t.name << " is the fresh run's";
      }
    }
  }
}

// A checkpoint of a model of `spec`, freshly initialised, as a run writes one.
std::string saved_checkpoint(const TempDir& dir, const ModelSpec& spec) {
  std::unique_ptr<Model> m = build_model(spec);
  Rng rng(1);
  m->init(rng);
  CheckpointData data;
  data.params = &m->params();
  data.state = {{"tag", "best"}, {"model_spec", spec_to_json(spec)}};
  const std::string dir_path = dir / ("ckpt_" + spec.type);
  save_checkpoint(dir_path, data);
  return dir_path;
}

ModelSpec gpt_spec() {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 10;
  s.lookback = 8;
  s.hidden = 8;
  s.heads = 2;
  return s;
}

// A refused training run: non-zero, the message names every part, and no run directory appears.
void expect_train_refused(const std::string& sets, const std::vector<std::string>& parts) {
  TempDir dir;
  const std::string run = dir / "run";
  Result r = run_seqtrain("train " + lstm_run().config + sets + " --quiet --out " + run);
  EXPECT_NE(r.rc, 0) << r.out;
  for (const auto& p : parts) EXPECT_CONTAINS(r.out, p);
  EXPECT_FALSE(fs::exists(run)) << "a refused run wrote " << run;
}

TEST(EncoderFrom, AnEncoderOfAnotherShapeIsRefusedNamingTheTensorAndBothShapes) {
  expect_train_refused(" --set model.hidden=12 --set model.encoder_from=" + lstm_run().encoder,
                       {"model.encoder_from", "rnn.weight_ih_l0", "[32, 3]", "[48, 3]", lstm_run().encoder});
}

TEST(EncoderFrom, AnEncoderOfAnotherFamilyIsRefusedNamingBoth) {
  expect_train_refused(" --set model.type=gru --set model.encoder_from=" + lstm_run().encoder,
                       {"model.encoder_from", "encoder of family lstm", "this model's is of family gru"});
  expect_train_refused(" --set model.type=lstm --set model.encoder_from=" + transformer_run().run,
                       {"model.encoder_from", "encoder of family transformer", "this model's is of family lstm"});
}

TEST(EncoderFrom, ASourceWithoutEncoderTensorsIsRefused) {
  TempDir dir;
  const std::string gpt = saved_checkpoint(dir, gpt_spec());
  expect_train_refused(" --set model.encoder_from=" + gpt,
                       {"model.encoder_from", gpt, "a gpt run", "holds no encoder tensors", "transformer.wte.weight"});
}

TEST(EncoderFrom, EncoderFromBesideInitFromIsRefused) {
  expect_train_refused(" --set model.encoder_from=" + lstm_run().encoder + " --set model.init_from=" + lstm_run().run,
                       {"model.encoder_from", "model.init_from", "both set"});
}

TEST(EncoderExport, EmbedOfAModelWithoutEncoderIsRefusedNamingTheRunAndItsType) {
  TempDir dir;
  ModelSpec mlp;
  mlp.type = "mlp";
  mlp.input_size = kF;
  mlp.lookback = kT;
  mlp.hidden = 8;
  const std::string ckpt = saved_checkpoint(dir, mlp);
  const std::string out = dir / "e.npy";
  Result r = run_seqtrain("embed " + ckpt + " --input " + (set_data() / "test_x.npy") + " --output " + out);
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "run '" + ckpt + "'");
  EXPECT_CONTAINS(r.out, "model.type mlp");
  EXPECT_CONTAINS(r.out, "no encoder");
  EXPECT_FALSE(fs::exists(out));
}

TEST(EncoderExport, ExportEncoderOfAGptRunIsRefusedNamingTheRunAndItsType) {
  TempDir dir;
  const std::string ckpt = saved_checkpoint(dir, gpt_spec());
  const std::string out = dir / "enc.safetensors";
  Result r = run_seqtrain("export " + ckpt + " --encoder " + out);
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "run '" + ckpt + "'");
  EXPECT_CONTAINS(r.out, "model.type gpt");
  EXPECT_CONTAINS(r.out, "no encoder");
  EXPECT_FALSE(fs::exists(out));
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) left += e.path().filename().string().find("enc") == 0;
  EXPECT_EQ(left, 0u) << "a temporary of the refused export was left behind";
}

TEST(EncoderExport, AnExistingFileIsReplacedOnlyWithOverwriteAndOnlyWhenItIsAnEncoder) {
  TempDir dir;
  const std::string other = write_file(dir, "notes.safetensors", "not mine");
  Result r = run_seqtrain("export " + lstm_run().run + " --encoder " + other + " --overwrite");
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "is not an encoder seqtrain exported");
  EXPECT_EQ(cli::slurp(other), "not mine");
  const std::string enc = dir / "enc.safetensors";
  ASSERT_EQ(run_seqtrain("export " + lstm_run().run + " --encoder " + enc).rc, 0);
  r = run_seqtrain("export " + lstm_run().run + " --encoder " + enc);
  EXPECT_NE(r.rc, 0);
  EXPECT_CONTAINS(r.out, "--overwrite");
  EXPECT_EQ(run_seqtrain("export " + lstm_run().run + " --encoder " + enc + " --overwrite").rc, 0);
}

}  // namespace
}  // namespace seqtrain::testing
