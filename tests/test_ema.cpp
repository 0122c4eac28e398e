// Weight averaging (optim/ema.h, train.ema_decay): over 20 AdamW steps with parameter groups (one
// frozen for the first steps) the average equals torch.optim.swa_utils.AveragedModel's with an EMA
// avg_fn within 1e-6 (tests/py/optim_step_ref.py --ema), and a frozen tensor's average stays its
// weights bitwise; putting the average in and taking it out is bitwise; a training run validates,
// checkpoints and tests the average (eval of its best checkpoint gives the validation record's
// loss; consecutive step checkpoints follow the formula from the trained weights kept beside
// them), resumes bit-identically across stops, and refuses a decay outside [0, 1) naming the key
// and writing nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "optim/ema.h"
#include "optim/optimizer.h"
#include "stop_at.h"
#include "test_trainer_util.h"
#include "train/checkpoint.h"
#include "train/data_plan.h"
#include "train/observer.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST(Ema, MatchesTorchAveragedModelOverAdamWSteps) {
  if (!torch_available()) GTEST_SKIP() << "python3 with torch is not installed";
  const size_t n = 256;
  const int steps = 20;
  const double decay = 0.8;  // short enough for 20 steps to move the average well away from the start
  const std::vector<size_t> cuts = {0, 40, 100, 130, 200, 256};
  Rng rng(41);
  std::vector<float> p(n), grads(n * steps);
  for (auto& v : p) v = rng.normal();
  for (int k = 0; k < steps; ++k) {
    const float scale = std::pow(10.f, rng.uniform(-2.f, 1.f));
    for (size_t i = 0; i < n; ++i) grads[k * n + i] = scale * rng.normal();
  }
  std::vector<double> lrs;
  for (int k = 0; k < steps; ++k) lrs.push_back(3e-2 * (0.6 + 0.4 * std::cos(0.3 * k)));
  // Tensor 2 frozen for the first 6 steps, tensor 3 during steps [8, 13), tensor 0 at a tenth of the rate.
  struct Group { double lr_scale; int frozen_from, frozen_to; };
  const std::vector<Group> groups = {{0.1, 0, 0}, {1, 0, 0}, {0.5, 0, 6}, {1, 8, 13}, {1, 0, 0}};

  TempDir dir;
  write_npy(dir / "params0.npy", p, {int64_t(n)});
  write_npy(dir / "grads.npy", grads, {steps, int64_t(n)});
  write_npy(dir / "lrs.npy", lrs, {steps});
  nlohmann::json spec = nlohmann::json::array();
  for (size_t i = 0; i < groups.size(); ++i)
    spec.push_back({{"offset", cuts[i]}, {"n", cuts[i + 1] - cuts[i]}, {"lr_scale", groups[i].lr_scale},
                    {"weight_decay", nullptr}, {"frozen_from", groups[i].frozen_from},
                    {"frozen_to", groups[i].frozen_to}});
  std::ofstream(dir / "groups.json") << spec.dump();
  ASSERT_EQ(run_python("optim_step_ref.py",
                       dir.path.string() + " --opt adamw --groups " + (dir / "groups.json") + " --ema 0.8"), 0);
  const std::vector<double> ref = read_npy(dir / "ema_torch.npy");
  ASSERT_EQ(ref.size(), n * steps);

  auto opt = make_optimizer(OptimizerOptions{});
  Ema ema(decay);
  for (int k = 0; k < steps; ++k) {
    std::vector<GroupRun> runs;
    for (size_t i = 0; i < groups.size(); ++i)
      runs.push_back({cuts[i], cuts[i + 1], groups[i].lr_scale, {},
                      groups[i].frozen_from <= k && k < groups[i].frozen_to});
    opt->set_groups(runs);
    opt->step(p.data(), grads.data() + k * n, n, lrs[k]);
    ema.update(p.data(), n);
    const std::vector<float> avg = ema.average();
    EXPECT_LT(rel_err(avg, std::vector<double>(ref.begin() + k * n, ref.begin() + (k + 1) * n)), 1e-6)
        << "the average differs from torch's after step " << k + 1;
    if (k < 6) {
      EXPECT_TRUE(same_bits(avg.data() + 100, p.data() + 100, 30)) << "a frozen tensor's average moved";
    }
    if (k == steps - 1) {
      EXPECT_GT(rel_err(avg, p), 1e-2) << "the average should lag the weights";
    }
  }
  EXPECT_EQ(ema.updates(), steps);
}

TEST(Ema, UpdatesFromACopyAndSwapsBitwise) {
  Ema ema(0.75);
  std::vector<float> p = {1.f, 2.f, 3.f};
  ema.use_average(p.data(), 3);  // no update yet: the average is the weights
  ema.restore(p.data(), 3);
  EXPECT_EQ(p, (std::vector<float>{1.f, 2.f, 3.f}));
  ema.update(p.data(), 3);
  EXPECT_EQ(ema.average(), p) << "the first update copies the weights (AveragedModel's n_averaged == 0)";
  p = {3.f, 2.f, 1.f};
  ema.update(p.data(), 3);
  EXPECT_EQ(ema.average(), (std::vector<float>{1.5f, 2.f, 2.5f}));  // 0.75 * ema + 0.25 * p
  EXPECT_EQ(ema.updates(), 2);

  ema.use_average(p.data(), 3);
  EXPECT_EQ(p, (std::vector<float>{1.5f, 2.f, 2.5f}));
  EXPECT_THROW(ema.update(p.data(), 3), Error) << "averaging the average";
  ema.restore(p.data(), 3);
  EXPECT_EQ(p, (std::vector<float>{3.f, 2.f, 1.f}));

  Ema resumed(0.75);
  resumed.load(ema.average(), ema.updates());
  resumed.update(p.data(), 3);
  ema.update(p.data(), 3);
  EXPECT_EQ(resumed.average(), ema.average());
  EXPECT_EQ(resumed.updates(), 3);
}

TEST(Ema, DecayOutsideTheRangeNamesTheKey) {
  for (double d : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    const std::string m = error_of([&] { Ema e(d); });
    EXPECT_NE(m.find("train.ema_decay"), std::string::npos) << d << ": " << m;
  }
  TempDir dir;
  for (const char* bad : {"1", "-0.5", "1.01", "fast"}) {
    const std::string out = dir / (std::string("run") + bad);
    const Result r = run_seqtrain("train " + example_config() + kSmall + " --set train.ema_decay=" + bad +
                                  " --quiet --out " + out);
    EXPECT_NE(r.rc, 0) << bad;
    EXPECT_NE(r.out.find("train.ema_decay"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[0, 1)"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out)) << "nothing written for " << bad;
  }
}

// 15 batches an epoch (an odd count: a grad_accum 2 step spans each epoch boundary).
Config tiny(std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.synthetic.rows=1200", "data.lookback=16", "data.horizon=2", "model.hidden=8",
                                "train.batch_size=64", "train.log_every=3", "runtime.threads=1",
                                "train.early_stopping.patience=0", "runtime.deterministic=true", "train.epochs=2",
                                "train.schedule.name=constant", "train.ema_decay=0.9"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config(example_config(), o);
}

// Checkpoint `dir`'s model.safetensors and the trained weights beside it.
std::vector<float> weights(const Config& c, const std::string& dir, std::vector<float>* raw) {
  auto m = make_model(model_spec(c, plan_data(c)));
  OptimizerState os;
  load_checkpoint(dir, m->params(), &os, raw);
  return std::vector<float>(m->params().params(), m->params().params() + m->params().size());
}

TEST(Ema, ARunValidatesCheckpointsAndTestsTheAverage) {
  const Config c = tiny({"train.checkpoint_every=1u", "train.keep_last=0"});
  TempDir dir;
  const std::string run = dir / "run";
  const TrainSummary s = train(c, TrainOptions(run, false, false, true));
  ASSERT_GT(s.steps, 10);
  const std::string ck = run + "/checkpoints/";
  std::vector<float> raw, raw_next;
  std::vector<float> avg = weights(c, ck + step_tag(1), &raw);
  ASSERT_EQ(raw.size(), avg.size());
  EXPECT_EQ(avg, raw) << "after the first step the average is the weights";
  for (int64_t k = 1; k < s.steps; ++k) {
    const std::vector<float> next = weights(c, ck + step_tag(k + 1), &raw_next);
    ASSERT_EQ(raw_next.size(), avg.size());
    for (size_t i = 0; i < avg.size(); ++i) {
      const double want = avg[i] + 0.1 * (double(raw_next[i]) - avg[i]);
      ASSERT_NEAR(next[i], want, 1e-6 * (1 + std::abs(want))) << "step " << k + 1 << ", element " << i;
    }
    avg = next;
    raw = raw_next;
  }
  EXPECT_GT(rel_err(avg, raw), 1e-3) << "the checkpoint's model.safetensors is the average, not the weights";
  EXPECT_TRUE(read_checkpoint_state(ck + "last").value("raw_weights", false));

  // Validation scored the average: the best checkpoint's weights give the best val record's loss.
  const Result val = run_seqtrain("eval " + run + " --split val");
  ASSERT_EQ(val.rc, 0) << val.out;
  double best_val = 1e300;
  for (const auto& r : read_metrics(run + "/metrics.jsonl"))
    if (r["split"] == "val") best_val = std::min(best_val, r["loss"].get<double>());
  EXPECT_NEAR(value_after(val.out, "loss"), best_val, 1e-6 + 1e-5 * best_val);

  // Off (the default): no trained weights beside the model, the same run as before the average.
  const Config off = tiny({"train.ema_decay=0"});
  train(off, TrainOptions(dir / "off", false, false, true));
  std::vector<float> none = {1.f};
  weights(off, dir / "off/checkpoints/last", &none);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(read_checkpoint_state(dir / "off/checkpoints/last").contains("raw_weights"));
}

// Stops mid-epoch and at an epoch's end (inside a gradient accumulation): the resumed run ends
// with the uninterrupted run's average, trained weights, moments and records, bit for bit.
TEST(Ema, ResumeIsBitIdentical) {
  const Config c = tiny({"train.grad_accum=2", "train.log_every=1", "train.epochs=3"});
  TempDir dir;
  const TrainSummary full = train(c, TrainOptions(dir / "full", false, false, true));
  struct Cut { int64_t update, epoch; };
  for (const Cut cut : {Cut{3, -1}, Cut{-1, 0}, Cut{12, -1}}) {
    const std::string run = dir / ("cut" + std::to_string(cut.update) + "_" + std::to_string(cut.epoch));
    ASSERT_EQ(train_stopped_at(c, run, cut.update, cut.epoch).stopped_by, "stop_token");
    const TrainSummary resumed = train(c, TrainOptions(run, true, false, true));
    EXPECT_EQ(resumed.steps, full.steps);
    EXPECT_EQ(resumed.best_val, full.best_val);
    EXPECT_EQ(timeless(read_metrics(run + "/metrics.jsonl")), timeless(read_metrics(dir / "full/metrics.jsonl")))
        << "stopped at update " << cut.update << " / epoch " << cut.epoch;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(slurp(run + "/checkpoints/last/" + f), slurp(dir / ("full/checkpoints/last/" + std::string(f))))
          << f << ", stopped at update " << cut.update << " / epoch " << cut.epoch;
  }
}

}  // namespace
}  // namespace seqtrain::testing
