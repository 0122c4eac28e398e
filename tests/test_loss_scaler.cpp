// Dynamic loss scaling (optim/loss_scaler.h) with torch GradScaler's rules: the update rule
// against a reference spelled out here, the fused unscale + finite check, a planted overflow
// through a real fp16 model (step skipped, parameters and AdamW state bit-identical, scale
// halved, counter reset, then growth after exactly growth_interval clean steps), a mixed
// sequence of steps, and the state surviving a checkpoint and --resume through the trainer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/gemm_bf16.h"
#include "config/config.h"
#include "models/forecaster.h"
#include "models/model.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/param_groups.h"
#include "optim/schedule.h"
#include "test_trainer_util.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

// torch/amp/grad_scaler.py + _amp_update_scale_, restated: on inf, scale *= backoff and the
// tracker resets; otherwise the tracker counts up and at growth_interval the scale grows
// (when the grown value is finite) and the tracker resets. The scale is a float32.
struct RefScaler {
  float scale;
  int64_t tracker = 0;
  double growth, backoff;
  int64_t interval;
  void update(bool inf) {
    if (inf) {
      scale = float(double(scale) * backoff);
      tracker = 0;
    } else if (tracker + 1 == interval) {
      const float g = float(double(scale) * growth);
      if (std::isfinite(g)) scale = g;
      tracker = 0;
    } else {
      ++tracker;
    }
  }
};

TEST(LossScaler, UpdateRuleMatchesGradScalerOverMixedSequence) {
  for (const auto& opts : {LossScalerOptions{}, LossScalerOptions{1024.0, 2.0, 0.5, 3},
                           LossScalerOptions{3.0e38, 4.0, 0.25, 2}, LossScalerOptions{7.0, 1.5, 0.3, 1}}) {
    LossScaler s(opts);
    RefScaler ref{float(opts.init), 0, opts.growth_factor, opts.backoff_factor, opts.growth_interval};
    Rng rng(5);
    int64_t skipped = 0;
    for (int i = 0; i < 5000; ++i) {
      // Runs of clean steps long enough to reach growth, broken by overflows.
      const bool inf = rng.uniform() < (opts.growth_interval > 100 ? 0.0003 : 0.2);
      s.update(inf);
      ref.update(inf);
      skipped += inf;
      ASSERT_EQ(s.scale(), ref.scale) << "step " << i;
      ASSERT_EQ(s.growth_tracker(), ref.tracker) << "step " << i;
    }
    EXPECT_EQ(s.skipped_total(), skipped);
    EXPECT_EQ(s.steps_total(), 5000);
  }
}

TEST(LossScaler, DefaultsAreGradScalers) {
  LossScaler s(LossScalerOptions{});
  EXPECT_EQ(s.scale(), 65536.f);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.f);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.f);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.f);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, UnscaleMultipliesAndFindsInfAndNaN) {
  for (size_t n : {size_t{37}, size_t{1} << 16}) {  // the serial and the parallel pass
    LossScaler s(LossScalerOptions{.init = 1024.0});
    std::vector<float> g(n);
    Rng rng(1);
    for (auto& v : g) v = rng.normal() * 1000.f;
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = g[i] * (1.f / 1024.f);
    std::vector<float> a = g;
    EXPECT_TRUE(s.unscale_finite(a.data(), n));
    EXPECT_EQ(a, want);
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()})
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        std::vector<float> b = g;
        b[at] = bad;
        EXPECT_FALSE(s.unscale_finite(b.data(), n)) << bad << " at " << at << " of " << n;
      }
  }
  // A scale below 1 makes the reciprocal > 1: a finite gradient can overflow once unscaled.
  LossScaler small(LossScalerOptions{.init = 0.25});
  std::vector<float> g = {1e38f, 1.f};
  EXPECT_FALSE(small.unscale_finite(g.data(), g.size()));
}

TEST(LossScaler, BadOptionsAndStateAreErrorsNamingTheKey) {
  EXPECT_CONTAINS(error_of([] { LossScaler s(LossScalerOptions{.init = 0}); }), "runtime.loss_scale.init");
  EXPECT_CONTAINS(error_of([] { LossScaler s(LossScalerOptions{.growth_factor = 1.0}); }),
                  "runtime.loss_scale.growth_factor");
  EXPECT_CONTAINS(error_of([] { LossScaler s(LossScalerOptions{.backoff_factor = 1.0}); }),
                  "runtime.loss_scale.backoff_factor");
  EXPECT_CONTAINS(error_of([] { LossScaler s(LossScalerOptions{.growth_interval = 0}); }),
                  "runtime.loss_scale.growth_interval");
  LossScaler s(LossScalerOptions{});
  EXPECT_CONTAINS(error_of([&] { s.load_json(nlohmann::json{{"scale", "big"}}); }), "loss_scaler");
  EXPECT_CONTAINS(error_of([&] { s.load_json(nlohmann::json{{"scale", -1.0}, {"growth_tracker", 0}}); }),
                  "loss_scaler");
  // A round trip restores everything.
  LossScaler a(LossScalerOptions{.growth_interval = 4});
  for (bool inf : {false, true, false, false, true, false}) a.update(inf);
  a.take_skipped_since_report();
  a.update(true);
  LossScaler b(LossScalerOptions{.growth_interval = 4});
  b.load_json(nlohmann::json::parse(a.to_json().dump()));
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.growth_tracker(), a.growth_tracker());
  EXPECT_EQ(b.skipped_total(), 3);
  EXPECT_EQ(b.take_skipped_since_report(), 1);
}

// A real fp16 forecaster under TrainStep with AdamW. Targets of 1e6 make the scaled loss
// gradient overflow fp16 inside the RNN's backward (the planted overflow); ordinary targets
// give clean steps.
struct Fp16Job {
  static constexpr int64_t B = 16, T = 12, C = 4;
  ModelSpec spec{"lstm", C, T, 16, 2, false, 0.f, 1};
  std::unique_ptr<Forecaster> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LrSchedule> sched;
  LossScaler scaler;
  std::unique_ptr<TrainStep> step;
  std::vector<float> x, y_ok, y_huge;
  explicit Fp16Job(LossScalerOptions so) : scaler(so) {
    model = std::make_unique<Forecaster>(spec, ModelEnv{.precision = resolve_precision("fp16")});
    Rng rng(11);
    model->init(rng);
    opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 1e-3});
    ScheduleOptions sco;
    sco.base_lr = 1e-3;
    sco.name = "cosine";
    sco.total_steps = 100;
    sched = make_schedule(sco);
    step = std::make_unique<TrainStep>(*model, *opt, *sched, StepOptions{LossKind::mse, {}, 1.0, 1, &scaler});
    x.resize(B * T * C);
    for (auto& v : x) v = rng.normal();
    y_ok.resize(B);
    for (auto& v : y_ok) v = rng.normal();
    y_huge.assign(B, 1e6f);
  }
  StepResult run(bool overflow) {
    return step->run(Tensor(x.data(), {B, T, C}), Tensor(overflow ? y_huge.data() : y_ok.data(), {B, 1}), 0);
  }
  std::vector<float> params() const {
    return {model->params().params(), model->params().params() + model->params().size()};
  }
};

TEST(LossScalerStep, PlantedOverflowSkipsTheStepThenScaleGrowsAfterInterval) {
  Fp16Job job(LossScalerOptions{.init = 65536.0, .growth_interval = 3});
  ASSERT_FALSE(job.run(false).skipped);
  ASSERT_FALSE(job.run(false).skipped);
  ASSERT_EQ(job.scaler.growth_tracker(), 2);
  const std::vector<float> before = job.params();
  const OptimizerState os = job.opt->state();
  const float scale = job.scaler.scale();

  const StepResult r = job.run(true);
  EXPECT_TRUE(r.updated);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isnan(r.grad_norm));
  EXPECT_EQ(job.params(), before) << "a skipped step must not touch the parameters";
  const OptimizerState after = job.opt->state();
  EXPECT_EQ(after.step, os.step) << "AdamW's step count (its bias correction) must not move";
  EXPECT_EQ(after.buffers, os.buffers) << "AdamW's moments must not move";
  EXPECT_EQ(job.scaler.scale(), scale * 0.5f);
  EXPECT_EQ(job.scaler.growth_tracker(), 0);
  EXPECT_EQ(job.scaler.skipped_total(), 1);
  // The skipped step still counts for the schedule: the LR moves on as in a PyTorch loop.
  EXPECT_EQ(job.step->updates(), 3);
  for (size_t i = 0; i < job.model->params().size(); ++i) ASSERT_EQ(job.model->params().grads()[i], 0.f);

  // Clean steps: the scale stays until exactly the third, then doubles.
  const float backed = job.scaler.scale();
  EXPECT_FALSE(job.run(false).skipped);
  EXPECT_EQ(job.scaler.scale(), backed);
  EXPECT_FALSE(job.run(false).skipped);
  EXPECT_EQ(job.scaler.scale(), backed);
  EXPECT_NE(job.params(), before);
  EXPECT_FALSE(job.run(false).skipped);
  EXPECT_EQ(job.scaler.scale(), backed * 2.f);
  EXPECT_EQ(job.scaler.growth_tracker(), 0);
  EXPECT_EQ(job.opt->step_count(), 2 + 3);
}

// A mixed sequence through the real step: which steps overflow is planted; the scale after
// each step and the skip flags follow the reference rule exactly, and the optimizer takes
// exactly the clean steps.
TEST(LossScalerStep, MixedSequenceFollowsTheReferenceRule) {
  const LossScalerOptions so{.init = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2};
  Fp16Job job(so);
  RefScaler ref{65536.f, 0, 2.0, 0.5, 2};
  const std::string plan = "..X.X...XX......X..";
  int64_t clean = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const bool overflow = plan[i] == 'X';
    const StepResult r = job.run(overflow);
    ref.update(overflow);
    clean += !overflow;
    ASSERT_EQ(r.skipped, overflow) << "step " << i;
    ASSERT_EQ(job.scaler.scale(), ref.scale) << "step " << i;
    ASSERT_EQ(job.scaler.growth_tracker(), ref.tracker) << "step " << i;
  }
  EXPECT_EQ(job.opt->step_count(), clean);
  EXPECT_EQ(job.step->updates(), static_cast<int64_t>(plan.size()));
}

// A skipped step must leave AdamW's t where it was, though only the device knows of the skip: a
// loss-scaled MLP from 2^127 with large targets (its first steps and later ones overflow) ends
// bit for bit where an unscaled run fed only the batches it did not skip ends (power-of-two
// scales are exact, and a constant schedule gives both the same learning rate).
TEST(LossScalerStep, ASkippedStepLeavesAdamWsBiasCorrectionWhereItWas) {
  ModelSpec spec;
  spec.type = "mlp";
  spec.input_size = 3;
  spec.lookback = 6;
  spec.hidden = 8;
  spec.layers = 2;
  spec.output_size = 2;
  struct Run {
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> opt;
    std::unique_ptr<LrSchedule> sched;
    std::unique_ptr<LossScaler> scaler;
    std::unique_ptr<TrainStep> step;
  };
  auto make = [&](bool scaled) {
    Run r;
    r.model = make_model(spec, ModelEnv{});
    Rng init(7);
    r.model->init(init);
    r.opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3});
    r.sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 3e-3});
    if (scaled) r.scaler = std::make_unique<LossScaler>(LossScalerOptions{.init = 0x1p127, .growth_interval = 2});
    StepOptions so;
    so.grad_clip = 0.5;
    so.scaler = r.scaler.get();
    r.step = std::make_unique<TrainStep>(*r.model, *r.opt, *r.sched, so);
    return r;
  };
  auto run = [&](Run& r, int64_t s) {
    Rng rng(100 + static_cast<uint64_t>(s));
    std::vector<float> x(4 * 6 * 3), y(4 * 2);
    for (auto& v : x) v = rng.uniform(-1.f, 1.f);
    for (auto& v : y) v = rng.uniform(-1.f, 1.f) * 100.f;
    return r.step->run(Tensor(x.data(), {4, 6, 3}), Tensor(y.data(), {4, 2}), 0);
  };
  Run scaled = make(true), plain = make(false);
  std::vector<int64_t> clean;
  for (int64_t s = 0; s < 24; ++s) {
    if (!run(scaled, s).skipped) clean.push_back(s);
    if (clean.empty()) {
      EXPECT_TRUE(std::isnan(scaled.step->grad_norm())) << "no norm before the first update";
    }
  }
  for (int64_t s : clean) run(plain, s);
  const int64_t skipped = scaled.scaler->skipped_total();
  EXPECT_GT(skipped, 3);
  EXPECT_EQ(static_cast<int64_t>(clean.size()), 24 - skipped);
  EXPECT_GT(clean.front(), 0);  // the first steps overflowed
  EXPECT_EQ(scaled.opt->step_count(), plain.opt->step_count());
  const std::vector<float> ws(scaled.model->params().params(),
                              scaled.model->params().params() + scaled.model->params().size());
  const std::vector<float> wp(plain.model->params().params(),
                              plain.model->params().params() + plain.model->params().size());
  EXPECT_EQ(ws, wp);
  EXPECT_EQ(scaled.opt->state().buffers, plain.opt->state().buffers);
}

// The update counts under device skips and parameter groups: a skip leaves the frozen range's
// count alone, and unfreezing folds the skips in before the counts part ways, so the skipping
// optimizer ends where one that was only handed the clean steps ends: the same counts (what a
// checkpoint writes), parameters and moments.
TEST(LossScalerStep, DeviceSkipsKeepEveryRangesUpdateCountAcrossAnUnfreeze) {
  const size_t n = 8;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = 0.1f * static_cast<float>(i + 1) - 0.35f;
  std::vector<float> pa(n, 0.5f), pb(n, 0.5f);
  auto opts = OptimizerOptions{.name = "adamw", .lr = 1e-2};
  auto skipping = make_optimizer(opts), clean = make_optimizer(opts);
  float flag = 0.f;  // the found-inf flag, in the CPU backend's memory (the host's)
  skipping->set_skip_flag(&flag);
  const std::vector<GroupRun> frozen = {GroupRun{0, 4, 1.0, std::nullopt, true}, GroupRun{4, n, 1.0, std::nullopt, false}};
  const std::vector<GroupRun> thawed = {GroupRun{0, 4, 1.0, std::nullopt, false}, GroupRun{4, n, 1.0, std::nullopt, false}};
  skipping->set_groups(frozen);
  clean->set_groups(frozen);
  // Steps under the frozen groups, then under the thawed ones: 'X' overflows (skipped on the device).
  for (const char* plan : {".X.X", "X..X."}) {
    for (const char* c = plan; *c; ++c) {
      flag = *c == 'X' ? 1.f : 0.f;
      skipping->step(pa.data(), g.data(), n, 1e-2);
      if (*c != 'X') clean->step(pb.data(), g.data(), n, 1e-2);
    }
    if (plan[0] == '.') {
      EXPECT_EQ(skipping->param_steps(n), clean->param_steps(n));
      skipping->set_groups(thawed);
      clean->set_groups(thawed);
    }
  }
  EXPECT_EQ(skipping->step_count(), 5);
  EXPECT_EQ(skipping->param_steps(n), (std::vector<StepCount>{{0, 4, 3}, {4, n, 5}}));
  EXPECT_EQ(skipping->param_steps(n), clean->param_steps(n));
  const OptimizerState a = skipping->state(), b = clean->state();
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.param_steps, b.param_steps);
  EXPECT_EQ(a.buffers, b.buffers);
  EXPECT_EQ(pa, pb);
}

using namespace cli;

Config fp16_config(std::vector<std::string> extra) {
  // An initial scale of 2^40 overflows fp16 at once: the first steps back off, and a short
  // growth interval makes the scale climb back into overflow again and again, so skips and
  // growth both happen across the checkpoint.
  std::vector<std::string> o = {"data.synthetic.rows=3000", "data.lookback=24", "data.horizon=4", "model.hidden=16",
                                "train.batch_size=64", "train.log_every=3", "runtime.threads=1",
                                "train.early_stopping.patience=0", "runtime.precision=fp16",
                                "runtime.deterministic=true", "runtime.loss_scale.init=1099511627776",
                                "runtime.loss_scale.growth_interval=4", "train.schedule.name=constant",
                                "train.checkpoint_every=5", "model.dropout=0.1"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config(example_config(), o);
}

class LossScalerResume : public ::testing::TestWithParam<int> {};

// grad_accum 1, and 3 (38 batches an epoch: `last` falls inside an accumulation, whose first
// micro-batches the resumed run replays under the restored scale).
TEST_P(LossScalerResume, StateSurvivesCheckpointAndResumeBitwise) {
  TempDir dir;
  const std::string a = dir / "a", b = dir / "b";
  const std::string accum = "train.grad_accum=" + std::to_string(GetParam());
  const TrainSummary full = train(fp16_config({"train.epochs=3", accum}), TrainOptions{a, false, false, true});
  train(fp16_config({"train.epochs=2", accum}), TrainOptions{b, false, false, true});
  const nlohmann::json mid = read_checkpoint_state(b + "/checkpoints/last");
  ASSERT_TRUE(mid.contains("loss_scaler")) << mid.dump();
  EXPECT_GT(mid["loss_scaler"]["skipped_total"].get<int64_t>(), 0);
  if (GetParam() > 1) {
    EXPECT_NE(mid["micro_steps"].get<int64_t>() % GetParam(), 0);
  }
  const TrainSummary resumed = train(fp16_config({"train.epochs=3", accum}), TrainOptions{b, true, false, true});

  const nlohmann::json sa = read_checkpoint_state(a + "/checkpoints/last");
  const nlohmann::json sb = read_checkpoint_state(b + "/checkpoints/last");
  EXPECT_EQ(sa["loss_scaler"], sb["loss_scaler"]);
  EXPECT_EQ(full.skipped_steps, resumed.skipped_steps);
  EXPECT_GT(full.skipped_steps, 0);
  EXPECT_EQ(slurp(a + "/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(slurp(a + "/checkpoints/last/optimizer.safetensors"), slurp(b + "/checkpoints/last/optimizer.safetensors"));
  EXPECT_EQ(timeless(read_metrics(a + "/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));

  // Train records carry the scale and the skips since the previous record; they add up.
  int64_t skips = 0, records = 0;
  for (const auto& rec : read_metrics(a + "/metrics.jsonl")) {
    if (rec.value("split", "") != "train") continue;
    ASSERT_TRUE(rec.contains("loss_scale") && rec.contains("skipped_steps")) << rec.dump();
    skips += rec["skipped_steps"].get<int64_t>();
    ++records;
  }
  EXPECT_GT(records, 0);
  EXPECT_LE(skips, full.skipped_steps);
  EXPECT_GT(skips, 0);
}

INSTANTIATE_TEST_SUITE_P(GradAccum, LossScalerResume, ::testing::Values(1, 3));

TEST(LossScalerTrainer, Fp32RecordsHaveNoScalerFields) {
  TempDir dir;
  Config c = fp16_config({"train.epochs=1", "train.max_steps=6"});
  c.runtime.precision = "fp32";
  train(c, TrainOptions{dir / "r", false, false, true});
  for (const auto& rec : read_metrics(dir / "r/metrics.jsonl")) EXPECT_FALSE(rec.contains("loss_scale"));
  EXPECT_FALSE(read_checkpoint_state(dir / "r/checkpoints/last").contains("loss_scaler"));
}

// The CLI: the log says fp16 is emulated and bf16 is the fast choice, the summary line counts
// the skipped steps, and a bad loss-scale key is an error naming it.
TEST(LossScalerTrainer, CliLogsEmulationAndSkippedStepsAndRejectsBadKeys) {
  TempDir dir;
  const Result r = run_seqtrain("train " + example_config() + " --out " + (dir / "run") + kSmall +
                                " --set train.epochs=1 --set runtime.precision=fp16"
                                " --set runtime.loss_scale.init=1099511627776");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "fp16 is emulated on this CPU");
  if (cpu_has_native_bf16()) {
    EXPECT_CONTAINS(r.out, "bf16 is the fast choice");
  }
  EXPECT_CONTAINS(r.out, "skipped on fp16 overflow");
  const Result bad = run_seqtrain("train " + example_config() + " --out " + (dir / "bad") + kSmall +
                                  " --set runtime.precision=fp16 --set runtime.loss_scale.backoff_factor=1.5");
  EXPECT_NE(bad.rc, 0);
  EXPECT_CONTAINS(bad.out, "runtime.loss_scale.backoff_factor");
  EXPECT_FALSE(fs::exists(dir / "bad/metrics.jsonl"));
}

}  // namespace
}  // namespace seqtrain::testing
