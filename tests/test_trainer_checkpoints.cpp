// Checkpoint rotation and crash safety of the trainer: step-<N> checkpoints every
// train.checkpoint_every steps (or per epoch), keep_last pruning that spares the checkpoint a
// run resumed from, crash leftovers (.tmp-*, .old-*) tidied, resume from a mid-epoch step
// checkpoint and from inside a gradient accumulation ending bit-identical to an uninterrupted
// run, the resume config check, and kill -9 at random moments (one during a checkpoint write).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <random>

#include "backend/cuda_plugin.h"
#include "config/config.h"
#include "io/safetensors.h"
#include "test_trainer_util.h"
#include "train/checkpoint.h"
#include "train/load_model.h"
#include "train/resume.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

// The quick job of kSmall as a Config, plus overrides.
// runtime.deterministic: these tests compare separate runs bit for bit, which the autotuner's
// timing-based kernel choices (on by default) would not promise.
Config small_config(std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.synthetic.rows=3000", "data.lookback=24", "data.horizon=4", "model.hidden=16",
                                "train.batch_size=64", "train.log_every=5", "runtime.threads=1",
                                "train.early_stopping.patience=0", "runtime.deterministic=true"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config(example_config(), o);
}

// The step of the newest train record in metrics.jsonl (0 when none); tolerates a line being
// written while it reads.
int64_t latest_step(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  int64_t step = 0;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("split", "") == "train") step = std::max<int64_t>(step, j.value("step", 0));
  }
  return step;
}

TrainSummary train_quiet(const Config& c, const std::string& out, bool resume = false) {
  return train(c, TrainOptions{out, resume, false, true});
}

std::vector<std::string> step_names(const std::string& run) {
  std::vector<std::string> out;
  for (const auto& [n, path] : list_step_checkpoints(run + "/checkpoints")) out.push_back(step_tag(n));
  return out;
}

// A tiny ParamStore with values, for checkpoint-directory unit tests.
struct TinyParams {
  ParamStore ps;
  TinyParams(float v = 1.f) {
    ps.add("w", {2, 3});
    ps.finalize();
    for (size_t i = 0; i < ps.size(); ++i) ps.params()[i] = v + float(i);
  }
  void save(const std::string& dir, int64_t step) const {
    save_checkpoint(dir, CheckpointData{&ps, OptimizerState{}, nlohmann::json{{"step", step}}, {}});
  }
};

TEST(TrainerCheckpoints, ConfigDifferencesNameDottedKeys) {
  Config a, b;
  b.train.optimizer.lr = 0.01;
  b.train.epochs = 20;
  b.data.synthetic.rows = 7;
  auto d = config_differences(to_yaml(a), to_yaml(b));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].key, "data.synthetic.rows");
  EXPECT_EQ(d[1].key, "train.epochs");
  EXPECT_EQ(d[1].before, "10");
  EXPECT_EQ(d[1].after, "20");
  EXPECT_EQ(d[2].key, "train.optimizer.lr");
  EXPECT_TRUE(config_differences(to_yaml(a), to_yaml(a)).empty());
  // A key only one side has (a config written by another seqtrain version).
  auto gone = config_differences(to_yaml(a) + "extra:\n  knob: 3\n", to_yaml(a));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].key, "extra.knob");
  EXPECT_EQ(gone[0].after, "(absent)");
}

TEST(TrainerCheckpoints, RecoverRestoresOldCopyAndRemovesLeftovers) {
  TempDir dir;
  const std::string ck = dir / "checkpoints";
  TinyParams p(3.f);
  p.save(ck + "/last", 7);
  p.save(ck + "/best", 5);
  // A crash between "move the previous last aside" and "rename the new one in".
  fs::rename(ck + "/last", ck + "/.old-last");
  fs::create_directories(ck + "/.tmp-last-4242");
  std::ofstream(ck + "/.tmp-last-4242/model.safetensors") << "half";
  // A crash after the new best was in place but before the old one was deleted.
  p.save(ck + "/.old-best", 1);
  fs::create_directories(ck + "/.tmp-prune-step-3-99");

  auto notes = recover_checkpoints(ck);
  EXPECT_EQ(notes.size(), 4u);
  EXPECT_EQ(checkpoint_dirs(dir.path.string()), (std::vector<std::string>{ck + "/best", ck + "/last"}));
  for (const auto& e : fs::directory_iterator(ck)) EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  TinyParams q(0.f);
  EXPECT_EQ(load_checkpoint(ck + "/last", q.ps)["step"], 7);
  EXPECT_EQ(q.ps.params()[5], 8.f);
  EXPECT_EQ(read_checkpoint_state(ck + "/best")["step"], 5) << "the newer best stays";
}

TEST(TrainerCheckpoints, PruneKeepsTheNewestAndTheProtectedOne) {
  TempDir dir;
  const std::string ck = dir / "checkpoints";
  TinyParams p;
  for (int64_t n : {1, 2, 3, 10, 20}) p.save(ck + "/" + step_tag(n), n);
  p.save(ck + "/best", 0);
  fs::create_directories(ck + "/step-notanumber");
  prune_step_checkpoints(ck, 0, "");
  EXPECT_EQ(list_step_checkpoints(ck).size(), 5u) << "keep_last 0 keeps all";
  prune_step_checkpoints(ck, 2, "step-2");
  std::vector<int64_t> left;
  for (const auto& [n, path] : list_step_checkpoints(ck)) left.push_back(n);
  EXPECT_EQ(left, (std::vector<int64_t>{2, 10, 20})) << "sorted numerically, not as text";
  EXPECT_TRUE(fs::exists(ck + "/best"));
  EXPECT_TRUE(fs::exists(ck + "/step-notanumber")) << "names that are not ours are left alone";
}

TEST(TrainerCheckpoints, LinkedCheckpointSharesFilesAndVerifies) {
  TempDir dir;
  const std::string ck = dir / "checkpoints";
  TinyParams p(2.f);
  p.save(ck + "/step-4", 4);
  TinyParams(9.f).save(ck + "/last", 1);
  link_checkpoint(ck + "/step-4", ck + "/last");
  TinyParams q(0.f);
  EXPECT_EQ(load_checkpoint(ck + "/last", q.ps)["step"], 4);
  struct stat st {};
  ASSERT_EQ(stat((ck + "/last/model.safetensors").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u) << "last shares step-4's files instead of copying them";
  fs::remove_all(ck + "/step-4");
  EXPECT_EQ(load_checkpoint(ck + "/last", q.ps)["step"], 4) << "pruning the step checkpoint leaves last whole";
}

TEST(TrainerCheckpoints, CheckpointEveryWritesStepCheckpointsAndKeepLastPrunes) {
  TempDir dir;
  // 2 epochs of 38 batches: steps 10, 20, ..., 70 and the epoch ends at 38 and 76.
  train_quiet(small_config({"train.epochs=2", "train.checkpoint_every=10", "train.keep_last=2"}), dir / "a");
  EXPECT_EQ(step_names(dir / "a"), (std::vector<std::string>{"step-60", "step-70"}));
  auto last = read_checkpoint_state(dir / "a/checkpoints/last");
  EXPECT_EQ(last["updates"], 76);
  EXPECT_EQ(last["epoch"], 2);
  EXPECT_TRUE(fs::exists(dir / "a/checkpoints/best/state.json"));
  for (const auto& d : checkpoint_dirs(dir / "a")) EXPECT_NO_THROW(read_checkpoint_state(d)) << d;

  // checkpoint_every 0: one step checkpoint per epoch, and `last` is that checkpoint.
  train_quiet(small_config({"train.epochs=3", "train.checkpoint_every=0", "train.keep_last=2"}), dir / "b");
  EXPECT_EQ(step_names(dir / "b"), (std::vector<std::string>{"step-76", "step-114"}));
  EXPECT_EQ(slurp(dir / "b/checkpoints/last/state.json"), slurp(dir / "b/checkpoints/step-114/state.json"));
  EXPECT_EQ(read_checkpoint_state(dir / "b/checkpoints/last")["tag"], "step-114");
}

// A checkpoint of one device resumes on another (runtime.device may change, as the thread count);
// the backend (cpu vs the reference oracle) may not. The GPU <-> CPU runs themselves are in
// bench/device/check.sh, which needs a GPU.
TEST(TrainerCheckpoints, ResumeConfigAcceptsAnotherDeviceNotAnotherBackend) {
  // Set on the struct: loading runtime.device cuda is refused on a machine without a GPU.
  Config before = small_config({});
  before.runtime.device = "cuda:0";
  const nlohmann::json st = {{"config", to_yaml(before)}};
  EXPECT_NO_THROW(check_resume_config(st, small_config({"runtime.device=cpu"}), "run", "ck", true));
  EXPECT_NO_THROW(check_resume_config(st, small_config({"runtime.device=auto"}), "run", "ck", true));
  Config other = before;
  other.runtime.backend = "reference";
  try {
    check_resume_config(st, other, "run", "ck", true);
    ADD_FAILURE() << "a changed runtime.backend was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.backend"), std::string::npos) << e.what();
  }
}

// A checkpoint written on a GPU (model_spec's backend cuda:0) loads on this machine's device
// (the GPU when there is one, else the CPU) for eval and resumes here with runtime.device
// changed; the spec check does not count the device as a model difference.
TEST(TrainerCheckpoints, AGpuCheckpointLoadsAndResumesOnThisMachinesDevice) {
  TempDir dir;
  const std::string run = dir / "run";
  train_quiet(small_config({"train.epochs=1"}), run);
  const std::string here = cuda_availability().devices > 0 ? "cuda:0" : "cpu";
  for (const char* tag : {"last", "best"}) {
    const std::string state_path = run + "/checkpoints/" + tag + "/state.json";
    nlohmann::json st = nlohmann::json::parse(slurp(state_path));
    ASSERT_EQ(st.at("model_spec").at("backend"), "cpu");
    st["model_spec"]["backend"] = "cuda:0";
    seal_checkpoint_state(st);  // as the GPU run sealed it
    std::ofstream(state_path) << st.dump();
  }
  LoadedModel l = load_model(run);
  EXPECT_EQ(l.model->params().backend().name(), here);
  const Config c = small_config({"train.epochs=2"});
  EXPECT_NO_THROW(check_resume_spec(read_checkpoint_state(run + "/checkpoints/last"), l.spec, run,
                                    run + "/checkpoints/last"));
  ModelSpec other = l.spec;
  other.backend = "reference";
  EXPECT_CONTAINS(error_of([&] {
                    check_resume_spec(read_checkpoint_state(run + "/checkpoints/last"), other, run,
                                      run + "/checkpoints/last");
                  }),
                  "backend");
  const TrainSummary s = train_quiet(c, run, /*resume=*/true);
  EXPECT_GT(s.steps, 0);
}

// A crash right after step-70 was written (mid-epoch: 70 = 38 + 32): the run resumes from the
// step checkpoint, extends to 3 epochs, never prunes step-70, and ends bit-identical to an
// uninterrupted 3-epoch run with the same metrics records.
TEST(TrainerCheckpoints, ResumeFromMidEpochStepCheckpointIsExactAndProtectedFromPruning) {
  TempDir dir;
  const std::vector<std::string> job = {"train.checkpoint_every=5", "train.keep_last=2", "model.dropout=0.1",
                                        "train.log_every=3", "train.schedule.name=constant"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), job.begin(), job.end());
    return small_config(more);
  };
  const std::string a = dir / "a", b = dir / "b";
  train_quiet(with({"train.epochs=3"}), a);
  train_quiet(with({"train.epochs=2"}), b);
  ASSERT_EQ(step_names(b), (std::vector<std::string>{"step-70", "step-75"}));
  fs::remove_all(b + "/checkpoints/last");
  fs::remove_all(b + "/checkpoints/step-75");
  // The crash also left a half-written checkpoint behind.
  fs::create_directories(b + "/checkpoints/.tmp-step-75-12345");

  train_quiet(with({"train.epochs=3"}), b, /*resume=*/true);
  EXPECT_EQ(step_names(b), (std::vector<std::string>{"step-70", "step-105", "step-110"}));
  EXPECT_FALSE(fs::exists(b + "/checkpoints/.tmp-step-75-12345"));
  EXPECT_EQ(slurp(a + "/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(slurp(a + "/checkpoints/last/optimizer.safetensors"), slurp(b + "/checkpoints/last/optimizer.safetensors"));
  EXPECT_EQ(timeless(read_metrics(a + "/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

// grad_accum 3 over 38 batches: epochs end inside an accumulation, so `last` is written with
// part of a gradient summed. The resumed run rebuilds it and ends bit-identical.
TEST(TrainerCheckpoints, CheckpointInsideGradientAccumulationResumesExactly) {
  TempDir dir;
  const std::vector<std::string> job = {"train.grad_accum=3", "train.log_every=2", "train.schedule.name=constant",
                                        "model.dropout=0.1"};
  auto with = [&](std::string epochs) {
    auto o = job;
    o.push_back(epochs);
    return small_config(o);
  };
  const std::string a = dir / "a", b = dir / "b";
  train_quiet(with("train.epochs=3"), a);
  train_quiet(with("train.epochs=1"), b);
  ASSERT_EQ(read_checkpoint_state(b + "/checkpoints/last")["micro_steps"].get<int64_t>() % 3, 2);
  train_quiet(with("train.epochs=3"), b, /*resume=*/true);
  EXPECT_EQ(slurp(a + "/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(timeless(read_metrics(a + "/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

// Kill -9 at random moments, five times over one run (the third kill timed to land while a
// checkpoint is being written): after every kill each checkpoint directory loads and verifies;
// the last resume finishes the run bit-identical to an uninterrupted one, metrics included.
// A checkpoint every 2 steps keeps a write in flight much of the time; every step would make
// the test slow on a busy disk (each checkpoint is several fsyncs).
TEST(TrainerCheckpoints, KillNineAtRandomMomentsLeavesOnlyWholeCheckpoints) {
  TempDir dir;
  const std::string args = "train " + example_config() + kSmall +
                           " --set train.epochs=3 --set train.checkpoint_every=2 --set train.keep_last=3"
                           " --set model.dropout=0.1 --set runtime.deterministic=true --set train.log_every=1 --quiet";
  const std::string a = dir / "a", b = dir / "b";
  ASSERT_EQ(run_seqtrain(args + " --out " + a).rc, 0);

  // The model of this job, to load checkpoints into.
  const Config cfg = load_config(a + "/config.yaml");
  const Dataset data = load_dataset(cfg);
  auto model = make_model(model_spec(cfg, data));

  // Kill points are training steps, not wall-clock delays, so the trials land mid-run however
  // fast or slow the disk is today: five sorted random steps of the 114, then a random
  // 0-20 ms more.
  std::mt19937 rng(20240607);
  std::vector<int64_t> targets;
  for (int i = 0; i < 5; ++i) targets.push_back(std::uniform_int_distribution<int64_t>(4, 104)(rng));
  std::sort(targets.begin(), targets.end());
  int killed = 0, cut_writes = 0;
  for (int trial = 0; trial < 5; ++trial) {
    const bool first = !fs::exists(b + "/config.yaml");
    // A resumed run first cuts metrics.jsonl back; until then it still shows the killed run's steps.
    const int64_t target = std::max(targets[trial], latest_step(b + "/metrics.jsonl") + 2);
    pid_t pid = spawn_seqtrain(first ? args + " --out " + b : "train --resume " + b + " --quiet", dir / "log");
    wait_until([&] { return !running(pid) || latest_step(b + "/metrics.jsonl") >= target; });
    if (trial == 2) {
      // Kill while a checkpoint write is in flight: its temporary directory exists.
      wait_until([&] {
        if (!running(pid)) return true;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(b + "/checkpoints", ec))
          if (e.path().filename().string().rfind(".tmp-", 0) == 0) return true;
        return false;
      });
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
    }
    kill(pid, SIGKILL);
    const int status = wait_status(pid);
    if (WIFSIGNALED(status)) ++killed;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(b + "/checkpoints", ec))
      if (e.path().filename().string().rfind(".tmp-", 0) == 0) ++cut_writes;  // this kill cut a write short
    else ASSERT_EQ(WEXITSTATUS(status), 0) << slurp(dir / "log");
    for (const auto& d : checkpoint_dirs(b)) {
      OptimizerState os;
      EXPECT_NO_THROW(load_checkpoint(d, model->params(), &os)) << "trial " << trial << ": " << d;
    }
    if (!WIFSIGNALED(status)) break;  // the run finished before this kill
  }
  EXPECT_GE(killed, 3) << "most kills should land while the run is going";
  RecordProperty("kills_that_cut_a_checkpoint_write_short", cut_writes);
  EXPECT_GE(cut_writes, 1) << "no kill landed during a checkpoint write";

  Result fin = run_seqtrain("train --resume " + b + " --quiet");
  ASSERT_EQ(fin.rc, 0) << fin.out;
  for (const auto& e : fs::directory_iterator(b + "/checkpoints"))
    EXPECT_NE(e.path().filename().string()[0], '.') << "crash leftover not cleaned: " << e.path();
  EXPECT_EQ(slurp(a + "/checkpoints/last/model.safetensors"), slurp(b + "/checkpoints/last/model.safetensors"));
  EXPECT_EQ(slurp(a + "/checkpoints/best/model.safetensors"), slurp(b + "/checkpoints/best/model.safetensors"));
  EXPECT_EQ(timeless(read_metrics(a + "/metrics.jsonl")), timeless(read_metrics(b + "/metrics.jsonl")));
}

}  // namespace
}  // namespace seqtrain::testing
