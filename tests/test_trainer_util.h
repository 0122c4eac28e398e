// Helpers for the tests that run whole training jobs (test_cli_train.cpp, test_trainer*.cpp):
// running the seqtrain binary in the foreground or in the background (to signal or kill it),
// reading files and metrics.jsonl, and the small quick job they train.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace seqtrain::testing::cli {

// Small and quick, but the same code path as examples/forecast.yaml.
// runtime.deterministic: tests compare separate runs of it bit for bit, which the autotuner's
// timing-based kernel choices (on by default) would not promise.
inline const std::string kSmall =
    " --set data.synthetic.rows=3000 --set data.lookback=24 --set data.horizon=4 --set model.hidden=16"
    " --set train.batch_size=64 --set train.log_every=5 --set runtime.threads=1 --set runtime.deterministic=true";

inline std::string example_config() { return source_dir() + "/examples/forecast.yaml"; }

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int rc;
  std::string out;  // stdout and stderr together
};

// Runs `seqtrain ARGS` to completion.
// env: variable assignments for the child, e.g. "SEQTRAIN_ISA=avx2".
inline Result run_seqtrain(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  const std::string log = tmp / "log";
  int rc = run_command((env.empty() ? "" : "env " + env + " ") + seqtrain_binary() + " " + args + " > " + log + " 2>&1");
  return {rc, slurp(log)};
}

// The number after "key: " in the command's output.
inline double value_after(const std::string& text, const std::string& key) {
  auto p = text.find(key + ": ");
  EXPECT_NE(p, std::string::npos) << key << " missing in:\n" << text;
  return p == std::string::npos ? 0 : std::stod(text.substr(p + key.size() + 2));
}

// Starts `seqtrain ARGS` in the background, output to `log`; returns its pid (the binary
// itself, not a shell, so signals reach seqtrain).
inline pid_t spawn_seqtrain(const std::string& args, const std::string& log) {
  // Built before fork: the test process has threads, so the child may only exec or _exit
  // (a lock another thread held at fork time, in malloc say, would never be released).
  const std::string cmd = "exec " + seqtrain_binary() + " " + args + " > " + log + " 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

// True while the child `pid` has not exited (it is not reaped here).
inline bool running(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// Polls `ready` every millisecond for up to `seconds`; true when it became true.
inline bool wait_until(const std::function<bool()>& ready, double seconds = 60) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// waitpid's status for pid.
inline int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

inline std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The records without their wall-clock fields, for comparing two runs of the same job.
inline std::vector<nlohmann::json> timeless(std::vector<nlohmann::json> records) {
  for (auto& r : records) {
    r.erase("samples_per_s");
    r.erase("tokens_per_s");
    r.erase("time_s");
    r.erase("data_wait_s");      // the "data" records' timings
    r.erase("data_wait_share");
    r.erase("epoch_train_s");
  }
  return records;
}

// Checkpoint directories under run/checkpoints, hidden ones (.tmp-*, .old-*) excluded.
inline std::vector<std::string> checkpoint_dirs(const std::string& run) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(run) / "checkpoints", ec))
    if (e.is_directory() && e.path().filename().string()[0] != '.') out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace seqtrain::testing::cli
