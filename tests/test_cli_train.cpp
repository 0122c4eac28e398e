// The `seqtrain` binary end to end: the Quickstart job beats the last-value baseline, the run
// directory contract, refusal to clobber a run, kill -9 + resume ending bit-identical to an
// uninterrupted run, SIGTERM writing `last` and resuming, a run killed before its first
// checkpoint starting over, corrupt checkpoints refused, eval and predict, --help on every
// command, data.nan_policy end to end. (Checkpoint rotation and random kill -9 trials are in
// test_trainer_checkpoints.cpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;
Result run(const std::string& args) { return run_seqtrain(args); }

const std::string kExample = example_config();

TEST(CliTrain, QuickstartJobBeatsLastValueBaselineAndWritesTheRunDirectory) {
  TempDir dir;
  const std::string out = dir / "run";
  Result r = run("train " + kExample + " --out " + out + " --quiet"
                 " --set model.hidden=32 --set runtime.threads=2 --set data.synthetic.rows=8000 --set train.epochs=8 --set train.batch_size=128");
  ASSERT_EQ(r.rc, 0) << r.out;
  const double best = value_after(r.out, "best_val_loss"), base = value_after(r.out, "baseline_last_value_val_mse");
  EXPECT_LT(best, 0.5 * base) << r.out;
  for (const char* f : {"config.yaml", "metrics.jsonl", "checkpoints/best/model.safetensors",
                        "checkpoints/best/optimizer.safetensors", "checkpoints/best/state.json",
                        "checkpoints/last/state.json"})
    EXPECT_TRUE(fs::exists(dir.path / "run" / f)) << f;
  std::ifstream m(out + "/metrics.jsonl");
  std::string line;
  std::set<std::string> splits;
  while (std::getline(m, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* k : {"split", "step", "epoch", "loss", "lr", "samples_per_s", "time_s"}) EXPECT_TRUE(j.contains(k)) << k;
    splits.insert(j["split"]);
  }
  EXPECT_EQ(splits, (std::set<std::string>{"train", "val", "test", "data"}));
}

TEST(CliTrain, RefusesToOverwriteARunUnlessAsked) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kSmall + " --set train.epochs=1 --quiet --out " + out).rc, 0);
  Result again = run("train " + kExample + kSmall + " --set train.epochs=1 --quiet --out " + out);
  EXPECT_EQ(again.rc, 2);
  EXPECT_NE(again.out.find("--resume"), std::string::npos) << again.out;
  EXPECT_EQ(run("train " + kExample + kSmall + " --set train.epochs=1 --quiet --overwrite --out " + out).rc, 0);
}

TEST(CliTrain, UnknownKeyNamesTheClosestOne) {
  TempDir dir;
  Result r = run("train " + kExample + " --set train.batchsize=3 --out " + (dir / "run"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("train.batch_size"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.path / "run" / "config.yaml"));
}

// An --out that cannot be made (a regular file in its path) is a clear error naming the path
// and the fix, exit 2, not an internal error.
TEST(CliTrain, OutThatCannotBeCreatedIsAClearError) {
  TempDir dir;
  write_file(dir, "afile", "x");
  const std::string out = (dir.path / "afile" / "run").string();
  Result r = run("train " + kExample + kSmall + " --set train.epochs=1 --quiet --out " + out);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "cannot create the run directory '" + out + "'");
  EXPECT_CONTAINS(r.out, "--out");
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(dir / "afile"), "x");
}

// Kill -9 during training (after the first checkpoint), resume, and the final weights equal
// an uninterrupted run's bit for bit (same threads, deterministic data order and dropout).
TEST(CliTrain, KillNineThenResumeMatchesUninterruptedRunBitForBit) {
  TempDir dir;
  const std::string args = "train " + kExample + kSmall + " --set train.epochs=8 --set model.dropout=0.1 --quiet";
  ASSERT_EQ(run(args + " --out " + (dir / "a")).rc, 0);

  const std::string b = dir / "b";
  pid_t pid = spawn_seqtrain(args + " --out " + b, dir / "b.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(b + "/checkpoints/last/state.json") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(fs::exists(b + "/checkpoints/last/state.json")) << "no checkpoint before the deadline";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the run finished before it could be killed";

  Result resumed = run("train --resume " + b);
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming"), std::string::npos) << resumed.out;
  auto sa = nlohmann::json::parse(slurp(dir / "a/checkpoints/last/state.json"));
  auto sb = nlohmann::json::parse(slurp(b + "/checkpoints/last/state.json"));
  EXPECT_EQ(sa["updates"], sb["updates"]);
  EXPECT_EQ(sa["checksums"]["model.safetensors"], sb["checksums"]["model.safetensors"]);
  EXPECT_EQ(slurp(dir / "a/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
}

TEST(CliTrain, CorruptCheckpointIsRefusedEvalAndPredictWork) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kSmall + " --set train.epochs=1 --quiet --out " + out).rc, 0);

  Result e = run("eval " + out);
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_GT(value_after(e.out, "rmse"), 0.0);
  // --split val scores the validation windows: the loss of the run's (one, best) val record.
  Result v = run("eval " + out + " --split val");
  ASSERT_EQ(v.rc, 0) << v.out;
  double val_loss = -1;
  for (const auto& r : read_metrics(out + "/metrics.jsonl"))
    if (r["split"] == "val") val_loss = r["loss"].get<double>();
  EXPECT_NEAR(value_after(v.out, "loss"), val_loss, 1e-6 + 1e-5 * val_loss);
  EXPECT_NE(value_after(v.out, "loss"), value_after(e.out, "loss"));
  Result both = run("eval " + out + " --split val --input " + (dir / "in.csv"));
  EXPECT_EQ(both.rc, 2) << both.out;
  EXPECT_CONTAINS(both.out, "give one of them");

  // A crash between moving the old best aside and renaming the new one in: eval reads .old-best.
  fs::rename(out + "/checkpoints/best", out + "/checkpoints/.old-best");
  Result old_best = run("eval " + out);
  EXPECT_EQ(old_best.rc, 0) << old_best.out;
  EXPECT_EQ(value_after(old_best.out, "rmse"), value_after(e.out, "rmse"));
  fs::rename(out + "/checkpoints/.old-best", out + "/checkpoints/best");

  // A CSV in the training columns: the synthetic series itself is not on disk, so write one.
  std::ofstream csv(dir / "in.csv");
  csv << "voltage,current,temperature,soc\n";
  for (int i = 0; i < 60; ++i) csv << 3.7 + 0.001 * i << "," << 1.0 << "," << 25.0 << "," << 0.5 + 0.001 * i << "\n";
  csv.close();
  Result p = run("predict " + out + " --input " + (dir / "in.csv") + " --output " + (dir / "pred.csv"));
  ASSERT_EQ(p.rc, 0) << p.out;
  std::string pred = slurp(dir / "pred.csv");
  EXPECT_EQ(pred.substr(0, pred.find('\n')), "voltage_t+1,voltage_t+2,voltage_t+3,voltage_t+4");
  EXPECT_EQ(std::count(pred.begin(), pred.end(), '\n'), 1 + (60 - 24 - 4 + 1));

  // Flip one byte of the best weights: the checksum check refuses the checkpoint.
  const std::string weights = out + "/checkpoints/best/model.safetensors";
  std::string bytes = slurp(weights);
  bytes[bytes.size() - 3] ^= 0x5a;
  std::ofstream(weights, std::ios::binary) << bytes;
  Result bad = run("eval " + out);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("checksum"), std::string::npos) << bad.out;

  // Starting a model from a checkpoint of another shape is refused with the tensor named.
  Result other = run("train " + kExample + kSmall + " --set model.hidden=8 --set train.epochs=1 --quiet --out " + (dir / "other"));
  ASSERT_EQ(other.rc, 0);
  Result shape = run("train " + kExample + kSmall + " --set model.init_from=" + (dir / "other/checkpoints/best") +
                     " --quiet --out " + (dir / "third"));
  EXPECT_EQ(shape.rc, 2);
  EXPECT_NE(shape.out.find("rnn.weight_ih_l0"), std::string::npos) << shape.out;
}

TEST(CliTrain, HelpWorksForEveryCommand) {
  for (const auto& [cmd, must] : std::vector<std::pair<std::string, std::string>>{
           {"--help", "train"}, {"train --help", "--resume"}, {"eval --help", "--input"},
           {"predict --help", "--output"}}) {
    Result r = run(cmd);
    EXPECT_EQ(r.rc, 0) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(must), std::string::npos) << cmd << "\n" << r.out;
  }
  EXPECT_NE(run("train --no-such-flag").rc, 0);
}

// A CSV with a NaN: the default policy names file:line:column; drop and ffill train to finite
// losses (a NaN that slipped through would poison every loss after it).
TEST(CliTrain, NanPolicyIsHonouredEndToEnd) {
  TempDir dir;
  const std::string csv = dir / "series.csv";
  std::ofstream f(csv);
  f << "a,b\n";
  const int bad_row = 57;  // data row index: on line bad_row + 2
  for (int i = 0; i < 300; ++i) {
    f << fmt::format("{:.4f}", std::sin(0.1 * i)) << "," << (i == bad_row ? std::string("nan") : fmt::format("{:.4f}", std::cos(0.07 * i))) << "\n";
  }
  f.close();
  std::ofstream(dir / "job.yaml") << "data:\n  source: csv\n  path: series.csv\n  features: [a, b]\n  targets: [b]\n"
                                     "  lookback: 8\nmodel:\n  hidden: 8\ntrain:\n  epochs: 1\n  batch_size: 32\n"
                                     "  log_every: 1\nruntime:\n  threads: 1\n";
  const std::string job = dir / "job.yaml";
  Result err = run("train " + job + " --quiet --out " + (dir / "e"));
  EXPECT_EQ(err.rc, 2) << err.out;
  // Line: header + 1-based row; column: just after "<a cell>,".
  const std::string where =
      fmt::format("series.csv:{}:{}:", bad_row + 2, fmt::format("{:.4f}", std::sin(0.1 * bad_row)).size() + 2);
  EXPECT_NE(err.out.find(where), std::string::npos) << where << "\n" << err.out;
  EXPECT_NE(err.out.find("data.nan_policy"), std::string::npos) << err.out;
  EXPECT_FALSE(fs::exists(dir / "e/config.yaml")) << "a failed run leaves no run directory behind";

  for (const std::string policy : {"drop", "ffill"}) {
    const std::string out = dir / policy;
    Result r = run("train " + job + " --quiet --set data.nan_policy=" + policy + " --out " + out);
    ASSERT_EQ(r.rc, 0) << policy << "\n" << r.out;
    const auto records = read_metrics(out + "/metrics.jsonl");
    ASSERT_GE(records.size(), 3u) << policy;
    for (const auto& rec : records)
      if (rec["split"] != "data") {
        EXPECT_TRUE(std::isfinite(rec["loss"].get<double>())) << policy << " " << rec;
      }
  }
}

// SIGTERM mid-run: the current step finishes, `last` is written, the exit code is 128 + 15,
// `last` loads and evaluates, and the resumed run ends bit-identical to an uninterrupted one.
TEST(CliTrain, SigtermWritesLastExitsCleanlyAndResumes) {
  TempDir dir;
  const std::string args = "train " + kExample + kSmall + " --set train.epochs=6 --set model.dropout=0.1 --quiet";
  ASSERT_EQ(run(args + " --out " + (dir / "a")).rc, 0);

  const std::string b = dir / "b";
  pid_t pid = spawn_seqtrain(args + " --out " + b, dir / "b.log");
  // The first train record (step 5) shows training is under way; stop it right then.
  ASSERT_TRUE(wait_until([&] { return read_metrics(b + "/metrics.jsonl").size() >= 1 || !running(pid); }));
  ASSERT_TRUE(running(pid)) << "the run ended before the signal:\n" << slurp(dir / "b.log");
  kill(pid, SIGTERM);
  const int status = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(status)) << "seqtrain died of signal " << WTERMSIG(status) << " instead of stopping cleanly:\n" << slurp(dir / "b.log");
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << slurp(dir / "b.log");
  EXPECT_NE(slurp(dir / "b.log").find("--resume"), std::string::npos) << slurp(dir / "b.log");
  ASSERT_TRUE(fs::exists(b + "/checkpoints/last/state.json"));
  auto st = nlohmann::json::parse(slurp(b + "/checkpoints/last/state.json"));
  auto sa = nlohmann::json::parse(slurp(dir / "a/checkpoints/last/state.json"));
  EXPECT_LT(st["updates"].get<int64_t>(), sa["updates"].get<int64_t>()) << "the signal landed after the run ended";
  Result e = run("eval " + b + "/checkpoints/last");
  EXPECT_EQ(e.rc, 0) << e.out;

  Result resumed = run("train --resume " + b + " --quiet");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_EQ(slurp(dir / "a/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(timeless(read_metrics(dir / "a/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

// kill -9 before the first checkpoint: --resume starts the run over, says so, and ends where
// a fresh run of the same job ends.
TEST(CliTrain, KilledBeforeFirstCheckpointResumesFromTheBeginningAndSaysSo) {
  TempDir dir;
  // One long epoch (checkpoints come at its end) so the kill surely lands before the first.
  const std::string args = "train " + kExample + kSmall + " --set data.synthetic.rows=20000 --quiet";
  const std::string b = dir / "b";
  pid_t pid = spawn_seqtrain(args + " --out " + b, dir / "b.log");
  ASSERT_TRUE(wait_until([&] { return fs::exists(b + "/config.yaml") || !running(pid); }));
  ASSERT_TRUE(running(pid)) << "the run ended before the kill:\n" << slurp(dir / "b.log");
  kill(pid, SIGKILL);
  wait_status(pid);
  ASSERT_TRUE(checkpoint_dirs(b).empty()) << "the kill came too late for this test";

  Result resumed = run("train --resume " + b + " --set train.max_steps=25");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("has no checkpoint yet; starting the run from the beginning"), std::string::npos)
      << resumed.out;
  ASSERT_EQ(run(args + " --set train.max_steps=25 --out " + (dir / "a")).rc, 0);
  EXPECT_EQ(slurp(dir / "a/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(timeless(read_metrics(dir / "a/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

// Users extend training: a resume may change train.epochs (and max_steps, patience, threads);
// any other change is refused naming the key, and nothing is written.
TEST(CliTrain, ResumeMayExtendEpochsButRefusesOtherChanges) {
  TempDir dir;
  const std::string a = dir / "a", b = dir / "b";
  const std::string args = "train " + kExample + kSmall + " --set train.schedule.name=constant --quiet";
  ASSERT_EQ(run(args + " --set train.epochs=2 --out " + b).rc, 0);

  const std::string before = slurp(b + "/metrics.jsonl");
  Result lr = run("train --resume " + b + " --set train.optimizer.lr=0.01 --quiet");
  EXPECT_EQ(lr.rc, 2);
  EXPECT_NE(lr.out.find("train.optimizer.lr"), std::string::npos) << lr.out;
  EXPECT_NE(lr.out.find("train.epochs"), std::string::npos) << "the message lists what may change:\n" << lr.out;
  EXPECT_EQ(slurp(b + "/metrics.jsonl"), before);

  // A checkpoint written before a key existed (here: runtime.loss_scale.growth_interval) resumes
  // when the key is at its default, and is refused when the resumed run sets another value.
  const std::string state_path = b + "/checkpoints/last/state.json";
  nlohmann::json st = nlohmann::json::parse(slurp(state_path));
  std::string old_config = st["config"].get<std::string>();
  const size_t key_at = old_config.find("    growth_interval:");
  ASSERT_NE(key_at, std::string::npos) << old_config;
  old_config.erase(key_at, old_config.find('\n', key_at) + 1 - key_at);
  st["config"] = old_config;
  std::ofstream(state_path) << st.dump(2);
  Result newer_key = run("train --resume " + b + " --set runtime.loss_scale.growth_interval=100 --quiet");
  EXPECT_EQ(newer_key.rc, 2);
  EXPECT_NE(newer_key.out.find("runtime.loss_scale.growth_interval"), std::string::npos) << newer_key.out;

  Result more = run("train --resume " + b + " --set train.epochs=4 --quiet");
  ASSERT_EQ(more.rc, 0) << more.out;
  EXPECT_NE(slurp(b + "/config.yaml").find("epochs: 4"), std::string::npos) << "config.yaml records the extension";
  ASSERT_EQ(run(args + " --set train.epochs=4 --out " + a).rc, 0);
  EXPECT_EQ(slurp(a + "/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  // The first run's test record is replaced by the extended run's records.
  EXPECT_EQ(timeless(read_metrics(a + "/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

}  // namespace
}  // namespace seqtrain::testing

namespace seqtrain::testing {
namespace {

// The loader's worker count changes nothing: same batches, same augmentation, same weights.
TEST(CliTrain, WorkerCountDoesNotChangeTheRunWithAugmentationAndShuffle) {
  TempDir dir;
  const std::string args = "train " + kExample + kSmall +
                           " --set train.epochs=2 --set train.shuffle=true --set data.augment.jitter_sigma=0.05"
                           " --set data.augment.scale_sigma=0.1 --set data.augment.mask_prob=0.05 --quiet";
  ASSERT_EQ(run(args + " --set data.workers=0 --out " + (dir / "w0")).rc, 0);
  ASSERT_EQ(run(args + " --set data.workers=3 --out " + (dir / "w3")).rc, 0);
  Result no_aug = run("train " + kExample + kSmall + " --set train.epochs=2 --set train.shuffle=true --quiet --out " +
                      (dir / "plain"));
  ASSERT_EQ(no_aug.rc, 0);
  const std::string w0 = slurp(dir / "w0/checkpoints/last/model.safetensors");
  EXPECT_EQ(w0, slurp(dir / "w3/checkpoints/last/model.safetensors"));
  EXPECT_NE(w0, slurp(dir / "plain/checkpoints/last/model.safetensors")) << "augmentation had no effect";
  // Every epoch reports its data wait.
  std::ifstream m(dir / "w3/metrics.jsonl");
  std::string line;
  int data_records = 0;
  while (std::getline(m, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] == "data") {
      ++data_records;
      EXPECT_GE(j["data_wait_share"].get<double>(), 0.0);
      EXPECT_LE(j["data_wait_share"].get<double>(), 1.0);
    }
  }
  EXPECT_EQ(data_records, 2);
}

}  // namespace
}  // namespace seqtrain::testing
