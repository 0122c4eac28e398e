// `seqtrain diagnose` (obs/diagnose.h): the run-time arithmetic, the workers and memory checks,
// and through the binary: a lookback longer than a split is an error (exit 1, the machine still
// printed), data.workers above the free cores a warning, a precision the CPU cannot run an error
// (the step then measured in fp32), nothing written; and the estimated epoch time within 25% of
// what training the same config then takes.
#include <gtest/gtest.h>

#include <cmath>

#include "data/loader.h"
#include "obs/diagnose.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

StepTiming timing() {
  StepTiming t;
  t.batches_per_epoch = 10;
  t.updates_per_epoch = 10;
  t.total_updates = 30;  // 3 epochs
  t.train_samples = 2300;
  t.val_batches = 2;
  t.test_batches = 3;
  t.warmup_batches = 2;
  t.warmup_s = 1.0;  // 0.2 s of it two steady batches: 0.8 s of first-step work
  t.timed_batches = 5;
  t.timed_samples = 5 * 256;
  t.timed_s = 0.5;
  t.eval_batch_s = 0.05;
  return t;
}

TEST(DiagnoseEstimate, AnEpochIsItsSamplesAtTheTimedRatePlusValidationTestAndFirstSteps) {
  Config c;
  c.train.epochs = 3;
  c.train.eval_every = "1e";
  const RunEstimate e = estimate_run(timing(), c);
  // Per sample, so the epoch's short last batch costs its share: 2300 x 0.5 s / 1280.
  EXPECT_NEAR(e.epoch_train_s, 2300 * 0.5 / 1280, 1e-12);
  EXPECT_NEAR(e.validation_s, 0.1, 1e-12);
  EXPECT_EQ(e.validations, 3);
  EXPECT_NEAR(e.test_s, 0.15, 1e-12);
  EXPECT_NEAR(e.run_s, 3 * e.epoch_train_s + 3 * 0.1 + 0.15 + 0.8, 1e-9);
  // Validation every 4 updates: 7 passes in 30 updates; train.max_steps 15 ends the run in epoch 2.
  c.train.eval_every = "4u";
  EXPECT_EQ(estimate_run(timing(), c).validations, 7);
  StepTiming capped = timing();
  capped.total_updates = 15;
  c.train.eval_every = "1e";
  const RunEstimate m = estimate_run(capped, c);
  EXPECT_EQ(m.validations, 1);
  EXPECT_NEAR(m.run_s, 1.5 * m.epoch_train_s + 0.1 + 0.15 + 0.8, 1e-9);
  c.train.eval_every = "0";
  EXPECT_EQ(estimate_run(timing(), c).validations, 0);
}

TEST(DiagnoseChecks, WorkersAboveTheFreeCoresAreAWarningWithTheFix) {
  EXPECT_FALSE(check_workers("auto", 2, 2));
  EXPECT_FALSE(check_workers("1", 4, 2));
  EXPECT_FALSE(check_workers("0", 2, 2));
  const auto f = check_workers("4", 2, 1);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->error);
  EXPECT_CONTAINS(f->text, "data.workers = 4 is above the 1 free core (2 cores, 1 compute thread)");
  EXPECT_CONTAINS(f->fix, "data.workers: auto");
  EXPECT_CONTAINS(f->fix, "at most 1");
  EXPECT_CONTAINS(check_workers("1", 2, 2)->fix, "or 0");  // every core computes
}

TEST(DiagnoseChecks, MemoryAboveWhatIsAvailableIsAnErrorNamingTheBatchThatFits) {
  Config c;
  c.train.batch_size = 1000;
  const double GiB = 1024.0 * 1024 * 1024;
  // 10 GiB of activations and 1 GiB else, 8 GiB free: 5.4 GiB of activations fit 80% of it.
  auto f = check_memory(11 * GiB, 8 * GiB, 10 * GiB, 4 * GiB, c);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->error);
  EXPECT_CONTAINS(f->text, "train.batch_size = 1000 needs about 11.0 GiB of RAM (10.0 GiB of it activations) and 8.0 "
                           "GiB is available");
  EXPECT_CONTAINS(f->fix, "train.batch_size: 540 or less");
  EXPECT_CONTAINS(f->fix, "train.grad_checkpoint: true (activations 4.0 GiB instead of 10.0 GiB)");
  // Near the limit: a warning; well below it or with the RAM unknown: nothing.
  f = check_memory(7 * GiB, 8 * GiB, 6 * GiB, 0, c);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->error);
  EXPECT_EQ(f->fix.find("grad_checkpoint"), std::string::npos);  // no checkpointed figure: not offered
  EXPECT_FALSE(check_memory(4 * GiB, 8 * GiB, 3 * GiB, 0, c));
  EXPECT_FALSE(check_memory(40 * GiB, 0, 30 * GiB, 0, c));
}

const std::string kQuick = " --set data.synthetic.rows=3000 --set runtime.threads=1 --steps 3";

TEST(DiagnoseCli, ALookbackLongerThanASplitIsAnErrorExitAndTheMachineIsStillPrinted) {
  const Result r = run_seqtrain("diagnose " + example_config() + kQuick + " --set data.lookback=400");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_CONTAINS(r.out, "machine:\n  cpu: ");
  EXPECT_CONTAINS(r.out, "  cores: ");
  EXPECT_CONTAINS(r.out, "error: data.split [0.8, 0.1, 0.1] gives the validation split 300 of the 3000 rows");
  EXPECT_CONTAINS(r.out, "lower data.lookback");
  EXPECT_CONTAINS(r.out, "diagnose: 1 error, 0 warnings");
}

TEST(DiagnoseCli, WorkersAboveTheFreeCoresAreAWarningAndNothingIsWritten) {
  TempDir dir;
  const std::string log = dir / "log";
  fs::create_directories(dir / "cwd");
  // One more worker than the machine has cores: above the free ones on any machine.
  const int64_t workers = system_cores() + 1;
  const int rc = run_command("cd " + (dir / "cwd") + " && " + seqtrain_binary() + " diagnose " + example_config() +
                             kQuick + " --set data.workers=" + std::to_string(workers) + " > " + log + " 2>&1");
  const std::string out = slurp(log);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_CONTAINS(out, "warning: data.workers = " + std::to_string(workers) + " is above the ");
  EXPECT_CONTAINS(out, "    fix: data.workers: auto");
  EXPECT_CONTAINS(out, "diagnose: 0 errors, ");
  // Everything else was measured all the same.
  for (const char* key : {"parameters: 52240", "activations: ", "activations with train.grad_checkpoint: ", "step_s: ",
                          "epoch_train_s: ", "run_s: "})
    EXPECT_CONTAINS(out, key);
  EXPECT_TRUE(fs::is_empty(dir / "cwd")) << "diagnose wrote into its working directory";
}

TEST(DiagnoseCli, APrecisionTheCpuCannotRunIsAnErrorAndTheStepIsMeasuredInFp32) {
  const Result r = run_seqtrain("diagnose " + example_config() + kQuick + " --set runtime.precision=bf16",
                                "SEQTRAIN_ISA=avx2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_CONTAINS(r.out, "error: runtime.precision bf16 needs a CPU with AVX512-BF16");
  EXPECT_CONTAINS(r.out, "(runtime.precision fp32)");
  EXPECT_CONTAINS(r.out, "epoch_train_s: ");
}

// The estimate must predict the second epoch's training time (the first autotunes) of a run of
// the same config: the quickstart's data and model, fewer rows. On one compute thread: on a
// machine whose cores other jobs share, two threads' barrier waits make a step's time the
// neighbours' load (10x swings measured), which no estimate can predict. The pair is measured
// again once when it misses, so one burst of that load does not fail the test; a systematic
// error fails both.
TEST(DiagnoseCli, TheEstimatedEpochTimeIsWithin25PercentOfTrainingTheSameConfig) {
  const std::string cfg = example_config() + " --set data.synthetic.rows=6000 --set runtime.threads=1";
  std::string misses;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Result d = run_seqtrain("diagnose " + cfg + " --steps 10");
    ASSERT_EQ(d.rc, 0) << d.out;
    const double estimate = value_after(d.out, "epoch_train_s");
    TempDir dir;
    const Result t = run_seqtrain("train " + cfg + " --set train.epochs=2 --quiet --out " + (dir / "run"));
    ASSERT_EQ(t.rc, 0) << t.out;
    std::vector<double> epochs;
    for (const auto& r : read_metrics(dir / "run/metrics.jsonl"))
      if (r["split"] == "data") epochs.push_back(r["epoch_train_s"].get<double>());
    ASSERT_EQ(epochs.size(), 2u);
    const double ratio = estimate / epochs[1];
    if (std::abs(ratio - 1) <= 0.25) return;
    misses += fmt::format("attempt {}: estimated {:.3f} s, trained {:.3f} s (ratio {:.2f})\n", attempt + 1, estimate,
                          epochs[1], ratio);
  }
  ADD_FAILURE() << "diagnose's epoch_train_s is not within 25% of the trained epoch's:\n" << misses;
}

}  // namespace
}  // namespace seqtrain::testing
