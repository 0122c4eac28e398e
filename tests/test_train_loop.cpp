// The training loop's seams: observers see every event in order; the communicator reduces the
// flat gradient buffer exactly once per optimizer step, and a non-primary rank writes nothing;
// a stop token ends a library call with a resumable checkpoint; evaluation and checkpoint
// frequencies in updates or epochs; state.json through RunState; frequency errors; a NaN loss
// stops the run and no checkpoint holds NaN weights.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <thread>

#include "config/config.h"
#include "config/frequency.h"
#include "test_trainer_util.h"
#include "thread_ranks.h"
#include "train/checkpoint.h"
#include "train/communicator.h"
#include "train/data_plan.h"
#include "train/observer.h"
#include "train/run_state.h"
#include "train/stop_token.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

Config tiny(std::vector<std::string> extra) {
  std::vector<std::string> o = {"data.synthetic.rows=1200", "data.lookback=16", "data.horizon=2", "model.hidden=8",
                                "train.batch_size=64", "train.log_every=3", "runtime.threads=1",
                                "train.early_stopping.patience=0", "runtime.deterministic=true", "train.epochs=2",
                                "train.schedule.warmup_steps=2"};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config(example_config(), o);
}

// Writes one line per event: "step 3", "epoch 0", "eval val", "checkpoint best", "end epochs".
struct Recorder : TrainObserver {
  std::vector<std::string> events;
  std::function<void(const StepEvent&)> on_each_step;
  void on_step(const StepEvent& e) override {
    events.push_back("step " + std::to_string(e.updates));
    if (on_each_step) on_each_step(e);
  }
  void on_epoch(const EpochEvent& e) override { events.push_back("epoch " + std::to_string(e.epoch)); }
  void on_eval(const EvalEvent& e) override { events.push_back("eval " + e.split + " " + std::to_string(e.updates)); }
  void on_checkpoint(const CheckpointEvent& e) override { events.push_back("checkpoint " + e.tag); }
  void on_end(const EndEvent& e) override { events.push_back("end " + e.summary->stopped_by); }
};

// Records the length of every float all-reduce (the gradient buffer's, or anything else's).
struct RecordingComm : Communicator {
  int rank_ = 0, world_ = 1;
  std::vector<size_t> float_reductions;
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce_sum(float*, size_t n) override { float_reductions.push_back(n); }
  void all_reduce_sum(double*, size_t) override {}
  void broadcast(float*, size_t) override {}
  void broadcast_bytes(void*, size_t, int) override {}  // a lone fake rank keeps its own bytes
  void barrier() override {}
};

size_t parameter_count(const Config& c) { return make_model(model_spec(c, plan_data(c)))->params().size(); }

TEST(TrainLoop, ObserverSeesEveryEventInOrder) {
  TempDir dir;
  Recorder rec;
  TrainOptions opt(dir / "run", false, false, true);
  opt.observers = {&rec};
  const TrainSummary s = train(tiny({}), opt);
  // 1200 rows -> windows for train; each epoch: step records every 3 updates, then the epoch's
  // end, validation (a new best at epoch 0 at least), the epoch checkpoint; then the test
  // evaluation and the end.
  const int64_t per_epoch = s.steps / 2;
  std::vector<std::string> want;
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t u = e * per_epoch + 1; u <= (e + 1) * per_epoch; ++u)
      if (u % 3 == 0) want.push_back("step " + std::to_string(u));
    want.push_back("epoch " + std::to_string(e));
    want.push_back("eval val " + std::to_string((e + 1) * per_epoch));
    if (e == 0) want.push_back("checkpoint best");
    if (e == 1 && rec.events.size() > want.size() && rec.events[want.size()] == "checkpoint best")
      want.push_back("checkpoint best");
    want.push_back("checkpoint step-" + std::to_string((e + 1) * per_epoch));
  }
  want.push_back("eval test " + std::to_string(s.steps));
  want.push_back("end epochs");
  EXPECT_EQ(rec.events, want);
}

TEST(TrainLoop, OneGradientAllReducePerOptimizerStep) {
  TempDir dir;
  for (int accum : {1, 3}) {
    RecordingComm comm;
    const Config c = tiny({"train.grad_accum=" + std::to_string(accum)});
    TrainOptions opt(dir / ("run" + std::to_string(accum)), false, false, true);
    opt.comm = &comm;
    const TrainSummary s = train(c, opt);
    EXPECT_EQ(comm.float_reductions, std::vector<size_t>(s.steps, parameter_count(c))) << "grad_accum " << accum;
  }
}

// A lone rank whose gradient "all-reduce" turns one gradient into NaN at update `at`: the step that
// follows writes NaN into the weights, as a diverged step does.
struct PoisoningComm : RecordingComm {
  size_t at = 0;
  void all_reduce_sum(float* data, size_t n) override {
    RecordingComm::all_reduce_sum(data, n);
    if (float_reductions.size() == at) data[0] = std::numeric_limits<float>::quiet_NaN();
  }
};

// Weights gone NaN: the next log record's loss stops the run with the update and the fixes, and
// no checkpoint is written after them; the earlier ones are kept, `last` among them.
TEST(TrainLoop, ANonFiniteLossStopsTheRunAndNoCheckpointHoldsNaN) {
  TempDir dir;
  // The error of a run in dir/name whose update 4 goes NaN.
  const auto poisoned = [&](const std::string& name, const std::string& checkpoint_every) {
    PoisoningComm comm;
    comm.at = 4;
    TrainOptions opt(dir / name, false, false, true);
    opt.comm = &comm;
    return error_of([&] { train(tiny({"train.checkpoint_every=" + checkpoint_every}), opt); });
  };
  {  // checkpoints every 2 updates: the one after the poisoned update 4 is refused
    const std::string e = poisoned("ckpt", "2");
    EXPECT_CONTAINS(e, "step-4' is not written: parameter");
    EXPECT_CONTAINS(e, "holds nan");
    EXPECT_TRUE(fs::exists(dir / "ckpt/checkpoints/step-2/state.json"));
    EXPECT_FALSE(fs::exists(dir / "ckpt/checkpoints/step-4"));
    EXPECT_EQ(read_checkpoint_state(dir / "ckpt/checkpoints/last").at("updates"), 2);
  }
  {  // no checkpoint due: the record at update 6 (log_every 3) reads the NaN loss
    const std::string e = poisoned("log", "100");
    EXPECT_CONTAINS(e, "the train loss is nan in the updates up to 6 (epoch 0)");
    EXPECT_CONTAINS(e, "train.grad_clip");
    const auto records = read_metrics(dir / "log/metrics.jsonl");
    ASSERT_FALSE(records.empty());
    EXPECT_EQ(records.back().at("step"), 6);
    EXPECT_TRUE(records.back().at("loss").is_null()) << "the record shows the NaN (JSON has none: null)";
    EXPECT_FALSE(fs::exists(dir / "log/checkpoints/last")) << "a checkpoint was written after the NaN";
  }
}

TEST(TrainLoop, NonPrimaryRankWritesNothing) {
  TempDir dir;
  RecordingComm comm;
  comm.rank_ = 1;
  comm.world_ = 2;
  TrainOptions opt(dir / "run", false, false, true);
  opt.comm = &comm;
  const TrainSummary s = train(tiny({}), opt);
  EXPECT_GT(s.steps, 0);
  EXPECT_FALSE(fs::exists(dir / "run")) << "rank 1 created the run directory";
  const Config c = tiny({});
  EXPECT_EQ(comm.float_reductions, std::vector<size_t>(s.steps, parameter_count(c)));
}

// model.norm batch normalises by each batch's statistics, which would be each rank's shard's:
// refused with more than one rank, naming the key and the fix, before anything is written; one
// rank trains it.
TEST(TrainLoop, BatchNormIsRefusedOnSeveralRanks) {
  TempDir dir;
  RecordingComm comm;
  comm.world_ = 2;
  TrainOptions opt(dir / "run", false, false, true);
  opt.comm = &comm;
  const Config c = tiny({"model.type=cnn", "model.layers=1", "model.kernel_sizes=[3]", "model.norm=batch", "train.epochs=1"});
  const std::string e = error_of([&] { train(c, opt); });
  EXPECT_CONTAINS(e, "model.norm");
  EXPECT_CONTAINS(e, "2 ranks");
  EXPECT_CONTAINS(e, "model.norm: layer");
  EXPECT_FALSE(fs::exists(dir / "run"));
  comm.world_ = 1;
  EXPECT_GT(train(c, opt).steps, 0);
}

// `c` trained on two thread ranks: rank 0 writes its run to dir/two, rank 1 to nowhere (it asks
// for dir/never, which must not appear).
std::vector<TrainSummary> train_on_two_ranks(const Config& c, const fs::path& dir) {
  ThreadGroup group(2);
  std::vector<TrainSummary> out(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      ThreadComm comm(group, r);
      TrainOptions opt((dir / (r == 0 ? "two" : "never")).string(), false, false, true);
      opt.comm = &comm;
      out[r] = train(c, opt);
    });
  for (auto& t : ranks) t.join();
  return out;
}

// Two ranks, each training on its shard of every global batch (the last one short and split
// unevenly), follow the one-process run: the count of targets and the gradients are summed
// over ranks before the update. Only rank 0 writes.
TEST(TrainLoop, TwoRanksTrainLikeOneProcess) {
  TempDir dir;
  const Config c = tiny({"train.batch_size=61", "train.grad_accum=2"});
  const TrainSummary one = train(c, TrainOptions(dir / "one", false, false, true));
  const std::vector<TrainSummary> out = train_on_two_ranks(c, dir.path);
  EXPECT_FALSE(fs::exists(dir / "never"));
  EXPECT_EQ(out[0].steps, one.steps);
  EXPECT_EQ(out[1].steps, one.steps);
  EXPECT_NEAR(out[0].best_val, one.best_val, 1e-5 * one.best_val);
  ASSERT_TRUE(out[0].test_loss && one.test_loss);
  EXPECT_NEAR(*out[0].test_loss, *one.test_loss, 1e-5 * *one.test_loss);
  std::vector<double> v1, v2;
  for (const auto& r : read_metrics(dir / "one/metrics.jsonl")) if (r["split"] == "val") v1.push_back(r["loss"]);
  for (const auto& r : read_metrics(dir / "two/metrics.jsonl")) if (r["split"] == "val") v2.push_back(r["loss"]);
  ASSERT_EQ(v1.size(), v2.size());
  for (size_t i = 0; i < v1.size(); ++i) EXPECT_NEAR(v2[i], v1[i], 1e-5 * v1[i]) << "validation " << i;
}

// train.zero on two thread ranks (the Communicator's default reduce-scatter and all-gather):
// each rank updates its half with its half of AdamW's moments, and the run follows one process;
// the checkpoint's moments are whole (gathered to rank 0), so one process resumes from it.
TEST(TrainLoop, TwoRanksWithZeroTrainLikeOneProcess) {
  TempDir dir;
  const Config c = tiny({"train.batch_size=61", "train.zero=1"});
  const TrainSummary one = train(c, TrainOptions(dir / "one", false, false, true));
  const std::vector<TrainSummary> out = train_on_two_ranks(c, dir.path);
  EXPECT_FALSE(fs::exists(dir / "never"));
  EXPECT_EQ(out[0].steps, one.steps);
  ASSERT_TRUE(out[0].test_loss && one.test_loss);
  EXPECT_NEAR(*out[0].test_loss, *one.test_loss, 1e-5 * *one.test_loss);
  std::vector<double> v1, v2;
  for (const auto& r : read_metrics(dir / "one/metrics.jsonl")) if (r["split"] == "train") v1.push_back(r["loss"]);
  for (const auto& r : read_metrics(dir / "two/metrics.jsonl")) if (r["split"] == "train") v2.push_back(r["loss"]);
  ASSERT_EQ(v1.size(), v2.size());
  for (size_t i = 0; i < v1.size(); ++i) EXPECT_NEAR(v2[i], v1[i], 1e-5 * v1[i]) << "train record " << i;
  const size_t n = parameter_count(c);
  const nlohmann::json st = read_checkpoint_state(dir / "two/checkpoints/last");
  EXPECT_EQ(st.at("optimizer_buffers").size(), 2u);
  ParamStore probe = make_model(model_spec(c, plan_data(c)))->params().clone_layout();
  OptimizerState os;
  load_checkpoint(dir / "two/checkpoints/last", probe, &os);
  for (const auto& [name, values] : os.buffers) EXPECT_EQ(values.size(), n) << name << " is whole";
}

TEST(TrainLoop, StopTokenStopsALibraryCallResumably) {
  TempDir dir;
  const TrainSummary full = train(tiny({}), TrainOptions(dir / "full", false, false, true));

  StopToken stop;
  Recorder rec;
  rec.on_each_step = [&](const StepEvent& e) { if (e.updates == 6) stop.request(); };
  TrainOptions opt(dir / "cut", false, false, true);
  opt.stop = &stop;
  opt.observers = {&rec};
  const TrainSummary cut = train(tiny({}), opt);
  EXPECT_EQ(cut.stopped_by, "stop_token");
  EXPECT_EQ(cut.steps, 6);
  EXPECT_FALSE(cut.test_loss.has_value());
  ASSERT_TRUE(fs::exists(dir / "cut/checkpoints/last/state.json"));
  EXPECT_EQ(read_checkpoint_state(dir / "cut/checkpoints/last").at("updates"), 6);

  const TrainSummary resumed = train(tiny({}), TrainOptions(dir / "cut", true, false, true));
  EXPECT_EQ(resumed.stopped_by, "epochs");
  EXPECT_EQ(resumed.steps, full.steps);
  EXPECT_EQ(resumed.best_val, full.best_val) << "the resumed run ends where the uninterrupted one does";
  EXPECT_EQ(timeless(read_metrics(dir / "cut/metrics.jsonl")), timeless(read_metrics(dir / "full/metrics.jsonl")));
}

// A stop inside a log interval: the resumed run's train records equal the uninterrupted run's
// bit for bit, wherever the stop falls (the losses before the checkpoint and after it are summed
// in one order, as if the run had not stopped).
TEST(TrainLoop, AStopInsideALogIntervalResumesToTheSameRecords) {
  TempDir dir;
  const std::vector<std::string> o = {"train.log_every=9", "train.eval_every=1u", "train.epochs=3"};
  train(tiny(o), TrainOptions(dir / "full", false, false, true));
  const auto full = timeless(read_metrics(dir / "full/metrics.jsonl"));
  for (int64_t at = 1; at < 18; ++at) {
    if (at % 9 == 0) continue;  // a stop on a record leaves nothing pending
    const std::string run = dir / ("cut" + std::to_string(at));
    StopToken stop;
    Recorder rec;
    struct StopAtEval : TrainObserver {
      StopToken* stop;
      int64_t at;
      void on_eval(const EvalEvent& e) override { if (e.updates == at) stop->request(); }
    } stopper;
    stopper.stop = &stop;
    stopper.at = at;
    TrainOptions opt(run, false, false, true);
    opt.stop = &stop;
    opt.observers = {&stopper};
    EXPECT_EQ(train(tiny(o), opt).stopped_by, "stop_token");
    train(tiny(o), TrainOptions(run, true, false, true));
    EXPECT_EQ(timeless(read_metrics(run + "/metrics.jsonl")), full) << "stopped at update " << at;
  }
}

TEST(TrainLoop, EvaluationAndCheckpointsCountedInUpdatesOrEpochs) {
  TempDir dir;
  train(tiny({"train.epochs=4", "train.eval_every=4u", "train.checkpoint_every=2e", "train.keep_last=0"}),
        TrainOptions(dir / "run", false, false, true));
  int64_t per_epoch = 0;
  std::vector<int64_t> val_steps;
  for (const auto& r : read_metrics(dir / "run/metrics.jsonl")) {
    if (r["split"] == "val") val_steps.push_back(r["step"]);
    if (r["split"] == "data" && r["epoch"] == 0) per_epoch = r["step"];
  }
  ASSERT_GT(per_epoch, 0);
  ASSERT_FALSE(val_steps.empty());
  for (size_t i = 0; i < val_steps.size(); ++i) EXPECT_EQ(val_steps[i], int64_t(4 * (i + 1)));
  EXPECT_EQ(val_steps.size(), size_t(4 * per_epoch / 4));
  // Step checkpoints after epochs 2 and 4 only; `last` every epoch.
  std::vector<std::string> steps;
  for (const auto& [n, path] : list_step_checkpoints(dir / "run/checkpoints")) steps.push_back(step_tag(n));
  EXPECT_EQ(steps, (std::vector<std::string>{step_tag(2 * per_epoch), step_tag(4 * per_epoch)}));

  // eval_every 0: no validation at all; `best` is the final state.
  const TrainSummary none = train(tiny({"train.eval_every=0"}), TrainOptions(dir / "none", false, false, true));
  for (const auto& r : read_metrics(dir / "none/metrics.jsonl")) EXPECT_NE(r["split"], "val");
  EXPECT_TRUE(none.test_loss.has_value());
  EXPECT_EQ(read_checkpoint_state(dir / "none/checkpoints/best").at("updates"), none.steps);
}

// eval_iters caps the validation pass: the same training, other val losses; a cap beyond the
// split's size is the whole split.
TEST(TrainLoop, EvalItersCapsTheValidationPass) {
  TempDir dir;
  auto val_losses = [&](const std::string& iters) {
    const std::string run = dir / ("r" + iters);
    train(tiny({"train.eval_iters=" + iters}), TrainOptions(run, false, false, true));
    std::vector<double> out;
    for (const auto& r : read_metrics(run + "/metrics.jsonl"))
      if (r["split"] == "val") out.push_back(r["loss"]);
    return out;
  };
  const auto whole = val_losses("0"), one = val_losses("1"), many = val_losses("1000");
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(many, whole);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_NE(one[0], whole[0]);
  EXPECT_NE(one[1], whole[1]);
}

TEST(TrainLoop, MalformedFrequencyNamesTheKeyAndTheForms) {
  for (const char* bad : {"500x", "u", "-3", "1.5e", "e5"}) {
    try {
      tiny({std::string("train.eval_every=") + bad});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("train.eval_every"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Nu"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Ne"), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(parse_frequency("10y", "train.checkpoint_every"), Error);
  const Frequency u = parse_frequency("500u", "k"), e = parse_frequency("3e", "k"), n = parse_frequency("7", "k");
  EXPECT_TRUE(u.due_after_update(1000) && !u.due_after_update(999) && !u.due_after_epoch(0));
  EXPECT_TRUE(e.due_after_epoch(2) && !e.due_after_epoch(1) && !e.due_after_update(3));
  EXPECT_TRUE(n.due_after_update(14) && n.unit == Frequency::Unit::updates);
  EXPECT_TRUE(parse_frequency("0", "k").never());
}

// A cosine warmup longer than the run is said in the config's keys, before anything is written.
TEST(TrainLoop, WarmupLongerThanTheRunNamesTheKeysAndWritesNothing) {
  TempDir dir;
  TrainOptions opt(dir / "run", false, false, true);
  try {
    train(tiny({"train.schedule.name=cosine", "train.schedule.warmup_steps=100000"}), opt);
    ADD_FAILURE() << "a 100000-step warmup in a 2-epoch run was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("train.schedule.warmup_steps = 100000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train.epochs"), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));
  EXPECT_NO_THROW(train(tiny({"train.schedule.name=cosine", "train.schedule.warmup_steps=1"}), opt));
}

// A run directory written by facea28 (tests/data/facea28_run) resumes for another epoch: its
// state.json lacks the newer fields, its config the newer keys.
TEST(TrainLoop, ResumesACheckpointWrittenByFacea28) {
  TempDir dir;
  const std::string run = dir / "run";
  fs::copy(source_dir() + "/tests/data/facea28_run", run, fs::copy_options::recursive);
  const size_t records_before = read_metrics(run + "/metrics.jsonl").size();
  const auto r = run_seqtrain("train --resume " + run + " --set train.epochs=3 --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(value_after(r.out, "steps"), 45) << "two epochs of 15 updates, then a third";
  const auto state = read_checkpoint_state(run + "/checkpoints/last");
  EXPECT_EQ(state.at("updates"), 45);
  EXPECT_EQ(state.at("epoch"), 3);
  const auto records = read_metrics(run + "/metrics.jsonl");
  EXPECT_GT(records.size(), records_before);
  EXPECT_EQ(records.back().at("split"), "test");
  EXPECT_EQ(records.back().at("step"), 45);
}

TEST(TrainLoop, RunStateRoundTripsStateJson) {
  RunState s;
  s.tag = "step-12";
  s.epoch = 3;
  s.batch_in_epoch = 5;
  s.micro_steps = 41;
  s.updates = 12;
  s.bad_validations = 2;
  s.best_val = 0.25;
  s.pending_loss_sum = 1.5;
  s.pending_loss_count = 3;
  s.metrics_bytes = 999;
  s.seed = 7;
  s.schedule = {{"step", 12}};
  s.vocab = {{"kind", "char"}};
  const RunState t = RunState::from_json(s.to_json());
  EXPECT_EQ(t.to_json(), s.to_json());
  EXPECT_EQ(t.best_val, 0.25);
  RunState fresh;
  EXPECT_TRUE(RunState::from_json(fresh.to_json()).to_json()["best_val"].is_null()) << "no best yet: null";
  nlohmann::json broken = s.to_json();
  broken.erase("updates");
  EXPECT_THROW(RunState::from_json(broken), Error);
}

}  // namespace
}  // namespace seqtrain::testing
