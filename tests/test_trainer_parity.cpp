// Loss parity of a whole `seqtrain train` run with a PyTorch training loop
// (tests/py/trainer_ref.py): same CSV, same initial weights, same batch order (no shuffle),
// 2 epochs with validation. Every metrics record (a train record per step, a val record per
// epoch, the final test record with the best weights) must agree within 1e-4 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "io/safetensors.h"
#include "models/model.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

struct ParityJob {
  const char* cell;
  int64_t layers;
};

void PrintTo(const ParityJob& j, std::ostream* os) { *os << j.cell << " x" << j.layers; }

class TrainerParity : public ::testing::TestWithParam<ParityJob> {};

TEST_P(TrainerParity, EveryMetricsRecordMatchesPyTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const ParityJob job = GetParam();
  TempDir dir;
  // Three smooth, noisy, differently scaled series; `c` is a feature and the target.
  const std::string csv = dir / "series.csv";
  {
    std::ofstream f(csv);
    f << "time,a,b,c\n";
    Rng rng(3);
    for (int i = 0; i < 400; ++i)
      f << "t" << i << "," << 10 + 2 * std::sin(0.11 * i) + 0.1 * rng.normal() << "," << 0.5 * std::cos(0.05 * i)
        << "," << 100 + 5 * std::sin(0.11 * i + 0.7) + 0.5 * rng.normal() << "\n";
  }
  const int64_t lookback = 12, horizon = 2, hidden = 16, batch = 16, epochs = 2;
  const double lr = 3e-3, weight_decay = 0.01, clip = 0.5;

  // The initial weights both sides start from.
  ModelSpec spec{job.cell, 3, lookback, hidden, job.layers, false, 0.f, horizon};
  auto model = make_model(spec);
  Rng init(17);
  model->init(init);
  save_params(dir / "init.safetensors", model->params());

  std::ofstream(dir / "job.yaml") << fmt::format(
      "data:\n  source: csv\n  path: series.csv\n  features: [a, b, c]\n  targets: [c]\n  lookback: {}\n"
      "  horizon: {}\n  split: [0.7, 0.2, 0.1]\n  normalize: zscore\n"
      "model:\n  type: {}\n  hidden: {}\n  layers: {}\n  init_from: init.safetensors\n"
      "train:\n  epochs: {}\n  batch_size: {}\n  shuffle: false\n  loss: mse\n  grad_clip: {}\n  log_every: 1\n"
      "  optimizer:\n    name: adamw\n    lr: {}\n    weight_decay: {}\n  schedule:\n    name: constant\n"
      "runtime:\n  threads: 1\n",
      lookback, horizon, job.cell, hidden, job.layers, epochs, batch, clip, lr, weight_decay);
  Result r = run_seqtrain("train " + (dir / "job.yaml") + " --quiet --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;

  ASSERT_EQ(run_python("trainer_ref.py",
                       fmt::format("{} {} {} --features a,b,c --targets c --lookback {} --horizon {} --split 0.7,0.2,0.1 "
                                   "--batch {} --epochs {} --lr {} --weight-decay {} --clip {} --cell {} --hidden {} "
                                   "--layers {}",
                                   csv, dir / "init.safetensors", dir / "ref.jsonl", lookback, horizon, batch, epochs, lr,
                                   weight_decay, clip, job.cell, hidden, job.layers)),
            0);
  auto ours = read_metrics(dir / "run/metrics.jsonl");
  // The per-epoch data-wait records have no PyTorch counterpart.
  std::erase_if(ours, [](const nlohmann::json& r) { return r["split"] == "data"; });
  const auto ref = read_metrics(dir / "ref.jsonl");
  // 280 train rows -> 267 windows -> 17 batches an epoch; a val record per epoch; one test record.
  ASSERT_EQ(ref.size(), size_t(2 * 17 + 2 + 1));
  ASSERT_EQ(ours.size(), ref.size());
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(ref[i].dump());
    EXPECT_EQ(ours[i]["split"], ref[i]["split"]);
    EXPECT_EQ(ours[i]["step"], ref[i]["step"]);
    EXPECT_EQ(ours[i]["epoch"], ref[i]["epoch"]);
    const double a = ours[i]["loss"], b = ref[i]["loss"];
    EXPECT_LT(std::abs(a - b) / std::abs(b), 1e-4) << "seqtrain " << a << " vs torch " << b;
    worst = std::max(worst, std::abs(a - b) / std::abs(b));
    if (ref[i].contains("lr")) {
      EXPECT_DOUBLE_EQ(ours[i]["lr"].get<double>(), ref[i]["lr"].get<double>());
    }
  }
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
  EXPECT_LT(ref[2 * 17].value("loss", 0.0), ref[0].value("loss", 0.0)) << "the run should learn something";
}

INSTANTIATE_TEST_SUITE_P(Forecaster, TrainerParity, ::testing::Values(ParityJob{"lstm", 2}, ParityJob{"gru", 1}),
                         [](const auto& info) { return std::string(info.param.cell) + "_l" + std::to_string(info.param.layers); });

}  // namespace
}  // namespace seqtrain::testing
