// The pretraining pipeline through the binary, as docs/PRETRAINING.md runs it: masked pretraining
// of a bidirectional LSTM on unlabelled, variable-length npy X (labels given anyway are warned
// about and unused), `export --encoder`, `embed` against the PyTorch mirror, and a classifier
// whose encoder equals the exported one at step 0 (model.encoder_from) with a fresh head.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "encoder_checks.h"
#include "io/safetensors.h"
#include "models/encoder.h"
#include "models/registry.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/encoder_from.h"
#include "train/load_model.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;

constexpr int64_t kN = 48, kT = 12, kF = 3;

// Unlabelled X with lengths 6..12 (zeros after each), and labels a classifier could learn.
void write_data(const TempDir& dir) {
  Rng rng(5);
  std::vector<float> x(static_cast<size_t>(kN * kT * kF), 0.f);
  std::vector<int64_t> len(kN), y(kN);
  for (int64_t i = 0; i < kN; ++i) {
    len[i] = 6 + i % 7;
    y[i] = i % 2;
    for (int64_t t = 0; t < len[i]; ++t)
      for (int64_t f = 0; f < kF; ++f)
        x[(i * kT + t) * kF + f] = std::sin(0.5f * t + f) * (y[i] ? 1.5f : 0.5f) + 0.1f * rng.normal();
  }
  write_npy(dir / "x.npy", x, {kN, kT, kF});
  write_npy(dir / "len.npy", len, {kN});
  write_npy(dir / "y.npy", y, {kN});
}

std::string config(const TempDir& dir, const std::string& train) {
  const std::string path = dir / "c.yaml";
  std::ofstream(path) << "seed: 3\ndata:\n  source: npy\n  npy:\n    train_x: x.npy\n    train_len: len.npy\n"
                         "    train_y: y.npy\n    val_x: x.npy\n    val_len: len.npy\n    val_y: y.npy\n"
                         "model:\n  type: lstm\n  hidden: 8\n  layers: 2\n  bidirectional: true\n  pooling: mean\n"
                         "train:\n  batch_size: 16\n  epochs: 2\n" << train;
  return path;
}

TEST(PretrainPipeline, PretrainExportEmbedAndFineTuneFromTheEncoder) {
  TempDir dir;
  write_data(dir);
  const std::string pre = dir / "pre";
  Result r = run_seqtrain("train " + config(dir, "  task: masked_pretrain\n  masking:\n    strategy: span\n"
                                               "    std_penalty: 0.1\n") + " --out " + pre);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "unused");  // the labels given to a pretraining run
  EXPECT_CONTAINS(r.out, "best_val_loss");

  const std::string enc = dir / "enc.safetensors";
  const SafetensorsFile exported = export_pretrained_encoder(pre, enc);
  ASSERT_NE(exported.find("rnn.weight_hh_l1_reverse"), nullptr);

  const std::string emb = dir / "e.npy";
  r = run_seqtrain("embed " + pre + " --input " + (dir / "x.npy") + " --lengths " + (dir / "len.npy") +
                   " --output " + emb);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<int64_t> shape;
  read_npy(emb, &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{kN, 16}));
  if (torch_available()) {
    EXPECT_EQ(run_python("encoder_check.py", enc + " " + pre + "/checkpoints/best/state.json " + (dir / "x.npy") +
                                                 " " + emb + " lstm " + (dir / "len.npy")),
              0);
  }

  // The classifier's model as the training loop builds it, then model.encoder_from's fill: the
  // encoder is the exported one bit for bit, the head the fresh init's.
  ModelSpec s = load_model(pre).spec;
  s.reconstruct = false;
  s.output_size = 2;
  auto fresh = build_model(s), m = build_model(s);
  Rng a(1), b(1);
  fresh->init(a);
  m->init(b);
  encoder_from(pre, *m);
  expect_encoder_and_fresh_head(m->params(), exported, fresh->params());

  // And through the binary: fine-tuning with a frozen first epoch trains and scores.
  r = run_seqtrain("train " + config(dir, "  task: classify\n  loss: cross_entropy\n  freeze_encoder_epochs: 1\n"
                                          "  encoder_lr_scale: 0.5\n") +
                   " --set model.encoder_from=" + enc + " --out " + (dir / "ft"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "model.encoder_from");
  EXPECT_CONTAINS(r.out, "accuracy 0.");
}

}  // namespace
}  // namespace seqtrain::testing
