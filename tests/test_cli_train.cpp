// The `seqtrain` binary end to end: the Quickstart job beats the last-value baseline, the run
// directory contract, refusal to clobber a run, kill -9 + resume ending bit-identical to an
// uninterrupted run, corrupt checkpoints refused, eval and predict.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace seqtrain::testing {
namespace {

// Small and quick, but the same code path as examples/forecast.yaml.
const std::string kSmall =
    " --set data.synthetic.rows=3000 --set data.lookback=24 --set data.horizon=4 --set model.hidden=16"
    " --set train.batch_size=64 --set train.log_every=5 --set runtime.threads=1";

struct Result { int rc; std::string out; };
Result run(const std::string& args) {
  TempDir tmp;
  const std::string log = tmp / "log";
  int rc = run_command(seqtrain_binary() + " " + args + " > " + log + " 2>&1");
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  return {rc, ss.str()};
}

double value_after(const std::string& text, const std::string& key) {
  auto p = text.find(key + ": ");
  EXPECT_NE(p, std::string::npos) << key << " missing in:\n" << text;
  return p == std::string::npos ? 0 : std::stod(text.substr(p + key.size() + 2));
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kExample = source_dir() + "/examples/forecast.yaml";

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
  EXPECT_EQ(splits, (std::set<std::string>{"train", "val", "test"}));
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

// Kill -9 during training (after the first checkpoint), resume, and the final weights equal
// an uninterrupted run's bit for bit (same threads, deterministic data order and dropout).
TEST(CliTrain, KillNineThenResumeMatchesUninterruptedRunBitForBit) {
  TempDir dir;
  const std::string args = "train " + kExample + kSmall + " --set train.epochs=8 --set model.dropout=0.1 --quiet";
  ASSERT_EQ(run(args + " --out " + (dir / "a")).rc, 0);

  const std::string b = dir / "b";
  pid_t pid = fork();
  if (pid == 0) {
    std::string cmd = seqtrain_binary() + " " + args + " --out " + b + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(b + "/checkpoints/last/state.json") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(fs::exists(b + "/checkpoints/last/state.json")) << "no checkpoint before the deadline";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the run finished before it could be killed";

  Result resumed = run("train --resume " + b + " --quiet");
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

}  // namespace
}  // namespace seqtrain::testing
