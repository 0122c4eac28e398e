// What a new user meets in the first hour, through the binary (issue 32): resume of a finished
// run is refused with the key that extends it and rewrites nothing; --resume with --overwrite or
// with a CONFIG that differs is refused by name; eval says which checkpoint, which split and
// which units; summary.json is the printed summary; "none yet" before the first validation;
// --version; the model summary (`seqtrain summary` and the train log) for every family; `data
// export` writes the CSV a run reads; the test record's epoch, the quiet resume, the val line's
// step and the first ETA. (Generating from an export is in test_export.cpp, the npy eval/predict
// points in test_cli_data.cpp, the docs' snippets in tests/py/doc_snippets.py.)
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <regex>

#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;
Result run(const std::string& args) { return run_seqtrain(args); }

const std::string kExample = example_config();
const std::string kOneEpoch = kSmall + " --set train.epochs=1 --quiet";

TEST(FirstHour, ResumingAFinishedRunIsRefusedWithTheKeyThatExtendsItAndRewritesNothing) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --out " + out).rc, 0);
  const std::string metrics = slurp(out + "/metrics.jsonl"), summary = slurp(out + "/summary.json");
  Result again = run("train --resume " + out);
  EXPECT_EQ(again.rc, 2) << again.out;
  EXPECT_CONTAINS(again.out, "is finished");
  EXPECT_CONTAINS(again.out, "--set train.epochs=2");
  EXPECT_EQ(slurp(out + "/metrics.jsonl"), metrics);
  EXPECT_EQ(slurp(out + "/summary.json"), summary);
  // The key it names extends the run.
  Result more = run("train --resume " + out + " --set train.epochs=2 --quiet");
  ASSERT_EQ(more.rc, 0) << more.out;
  EXPECT_EQ(value_after(more.out, "epochs"), 2);
  // A run ended by train.max_steps says that key.
  const std::string capped = dir / "capped";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --set train.max_steps=3 --set train.schedule.warmup_steps=2 --out " + capped).rc, 0);
  Result c = run("train --resume " + capped);
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_CONTAINS(c.out, "--set train.max_steps=6");
}

TEST(FirstHour, ResumeRefusesOverwriteAndAConfigThatDiffersByName) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --out " + out).rc, 0);
  const std::string metrics = slurp(out + "/metrics.jsonl");
  Result both = run("train --resume " + out + " --overwrite");
  EXPECT_EQ(both.rc, 2) << both.out;
  EXPECT_CONTAINS(both.out, "give one of them");
  // CONFIG without the run's --set differs in those keys: named, with both values.
  Result differs = run("train " + kExample + " --resume " + out);
  EXPECT_EQ(differs.rc, 2) << differs.out;
  EXPECT_CONTAINS(differs.out, "data.lookback: 64 in " + kExample + ", 24 in");
  EXPECT_CONTAINS(differs.out, "model.hidden: 64 in " + kExample + ", 16 in");
  EXPECT_EQ(slurp(out + "/metrics.jsonl"), metrics);
  // The same CONFIG and --set with a key a resumed run may change: taken, the run goes on.
  Result same = run("train " + kExample + kSmall + " --set train.epochs=2 --quiet --resume " + out);
  ASSERT_EQ(same.rc, 0) << same.out;
  EXPECT_EQ(value_after(same.out, "epochs"), 2);
}

TEST(FirstHour, EvalNamesTheCheckpointTheSplitAndTheUnits) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --out " + out).rc, 0);
  Result e = run("eval " + out);
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_CONTAINS(e.out, "checkpoint: " + out + "/checkpoints/best (best, epoch 0, step ");
  EXPECT_CONTAINS(e.out, "split: test (");
  EXPECT_CONTAINS(e.out, "(mse in normalized units");
  EXPECT_CONTAINS(e.out, "(in the units of voltage");
  Result v = run("eval " + out + " --split val");
  EXPECT_CONTAINS(v.out, "split: val (");
}

// A text run's eval of the validation split says why its loss differs from the log's capped
// one, and a missing split names data.split, not the npy keys.
TEST(FirstHour, TextEvalSaysHowItsLossWasComputed) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += i % 3 ? "the cat sat on the mat. " : "a dog ran to the sea.\n";
  const std::string corpus = write_file(dir, "t.txt", text);
  const std::string cfg = write_file(dir, "t.yaml",
                                     "data:\n  source: text\n  path: " + corpus +
                                         "\n  block_size: 16\n  stride: 4\n  split: [0.8, 0.2, 0]\n"
                                         "model:\n  hidden: 16\n  embed_size: 8\n"
                                         "train:\n  epochs: 1\n  batch_size: 8\n  loss: cross_entropy\n  eval_iters: 2\n"
                                         "runtime:\n  threads: 1\n");
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + cfg + " --quiet --out " + out).rc, 0);
  Result v = run("eval " + out + " --split val");
  ASSERT_EQ(v.rc, 0) << v.out;
  EXPECT_CONTAINS(v.out, "first 16 (train.eval_iters 2 x train.batch_size 8), so they differ");
  EXPECT_CONTAINS(v.out, "cross-entropy in nats");
  Result t = run("eval " + out);
  EXPECT_EQ(t.rc, 2) << t.out;
  EXPECT_CONTAINS(t.out, "data.split");
  EXPECT_EQ(t.out.find("data.npy"), std::string::npos) << t.out;
}

TEST(FirstHour, SummaryJsonHoldsThePrintedSummaryAndNoneYetBeforeAValidation) {
  TempDir dir;
  const std::string out = dir / "run";
  Result r = run("train " + kExample + kOneEpoch + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json s = nlohmann::json::parse(slurp(out + "/summary.json"));
  EXPECT_EQ(s["stopped_by"], "epochs");
  EXPECT_EQ(s["steps"].get<double>(), value_after(r.out, "steps"));
  EXPECT_NEAR(s["best_val_loss"].get<double>(), value_after(r.out, "best_val_loss"), 1e-6);
  EXPECT_NEAR(s["test_loss"].get<double>(), value_after(r.out, "test_loss"), 1e-6);
  const std::string none = dir / "none";
  Result n = run("train " + kExample + kOneEpoch + " --set train.eval_every=0 --out " + none);
  ASSERT_EQ(n.rc, 0) << n.out;
  EXPECT_CONTAINS(n.out, "best_val_loss: none yet");
  EXPECT_EQ(n.out.find("inf"), std::string::npos) << n.out;
  EXPECT_TRUE(nlohmann::json::parse(slurp(none + "/summary.json"))["best_val_loss"].is_null());
}

TEST(FirstHour, VersionNamesTheBuild) {
  Result v = run("--version");
  ASSERT_EQ(v.rc, 0) << v.out;
  EXPECT_TRUE(std::regex_search(v.out, std::regex("^seqtrain \\d+\\.\\d+\\.\\d+\n"))) << v.out;
  EXPECT_TRUE(std::regex_search(v.out, std::regex("commit: ([0-9a-f]{12}(-dirty)?|unknown)\n"))) << v.out;
  EXPECT_CONTAINS(v.out, "cpu kernels built: plain, avx2, avx512, avx512_bf16");
  EXPECT_CONTAINS(v.out, "cuda plugin: ");
  EXPECT_EQ(run("").rc, 2);  // no command: the help, not a silent success
}

// The summary table of every family: its rows' parameters sum to the model's total (no
// "(other)": every parameter is owned by a listed layer), and the train log shows the same.
TEST(FirstHour, ModelSummaryListsEveryLayerOfEveryFamily) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be. ";
  const std::string corpus = write_file(dir, "t.txt", text);
  const std::string lm = write_file(dir, "lm.yaml", "data:\n  source: text\n  path: " + corpus +
                                                        "\n  block_size: 16\nmodel:\n  hidden: 16\n  layers: 2\n  heads: 2\n"
                                                        "train:\n  loss: cross_entropy\n");
  const std::vector<std::string> configs = {kExample + kSmall, kExample + kSmall + " --set model.type=mlp",
                                            kExample + kSmall + " --set model.type=gru --set model.bidirectional=true",
                                            lm, lm + " --set model.type=gpt"};
  for (const std::string& c : configs) {
    Result s = run("summary " + c);
    ASSERT_EQ(s.rc, 0) << c << s.out;
    EXPECT_EQ(s.out.find("(other)"), std::string::npos) << s.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(s.out, m, std::regex("total: ([0-9,]+) parameters"))) << s.out;
    const std::string total = std::regex_replace(m[1].str(), std::regex(","), "");
    int64_t sum = 0;
    const std::regex row("  ([0-9,]+)\n");
    for (auto it = std::sregex_iterator(s.out.begin(), s.out.end(), row); it != std::sregex_iterator(); ++it)
      sum += std::stoll(std::regex_replace((*it)[1].str(), std::regex(","), ""));
    EXPECT_EQ(std::to_string(sum), total) << s.out;
    Result t = run("train " + c + " --set train.max_steps=1 --set train.epochs=1 --set train.schedule.warmup_steps=0 --out " +
                   (dir / "run") + " --overwrite");
    ASSERT_EQ(t.rc, 0) << c << t.out;
    EXPECT_CONTAINS(t.out, "total: " + m[1].str() + " parameters");
    EXPECT_CONTAINS(t.out, " " + total + " parameters, ");  // the log's count, from the ParamStore
  }
  Result l = run("summary " + lm);
  EXPECT_CONTAINS(l.out, "rnn.l1");
  EXPECT_CONTAINS(l.out, "[B, 16, 16]");
}

// The synthetic source written as CSV is what the run reads: a csv run on it has the same
// statistics and the same losses.
TEST(FirstHour, DataExportWritesTheCsvTheRunReads) {
  TempDir dir;
  const std::string csv = dir / "d.csv";
  Result e = run("data export " + kExample + kSmall + " --out " + csv);
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_EQ(slurp(csv).substr(0, slurp(csv).find('\n')), "voltage,current,temperature,soc");
  const std::string a = dir / "a", b = dir / "b";
  Result ra = run("train " + kExample + kOneEpoch + " --set train.max_steps=5 --set train.schedule.warmup_steps=2 --out " + a);
  Result rb = run("train " + kExample + kOneEpoch + " --set train.max_steps=5 --set train.schedule.warmup_steps=2 --set data.source=csv --set data.path=" +
                  csv + " --out " + b);
  ASSERT_EQ(ra.rc, 0) << ra.out;
  ASSERT_EQ(rb.rc, 0) << rb.out;
  const auto sa = nlohmann::json::parse(slurp(a + "/checkpoints/best/state.json"));
  const auto sb = nlohmann::json::parse(slurp(b + "/checkpoints/best/state.json"));
  ASSERT_EQ(sa["normalizer"]["columns"], sb["normalizer"]["columns"]);
  for (size_t i = 0; i < sa["normalizer"]["shift"].size(); ++i)
    EXPECT_NEAR(sa["normalizer"]["shift"][i].get<double>(), sb["normalizer"]["shift"][i].get<double>(), 1e-6);
  EXPECT_NEAR(value_after(ra.out, "test_loss"), value_after(rb.out, "test_loss"), 1e-4);
  // Refusals write nothing.
  Result bad = run("data export " + kExample + " --out " + (dir / "x.npy"));
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_FALSE(fs::exists(dir / "x.npy"));
}

TEST(FirstHour, SmallInconsistenciesAreGone) {
  TempDir dir;
  const std::string out = dir / "run";
  Result r = run("train " + kExample + kSmall + " --set train.epochs=2 --set train.log_every=1 --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  // The test record's epoch is the last val record's.
  int64_t val_epoch = -1, test_epoch = -2;
  for (const auto& rec : read_metrics(out + "/metrics.jsonl")) {
    if (rec["split"] == "val") val_epoch = rec["epoch"];
    if (rec["split"] == "test") test_epoch = rec["epoch"];
  }
  EXPECT_EQ(test_epoch, val_epoch);
  // The first step (autotune, warm-up) gives no ETA; each line says the step of the run's total
  // and how much of the epoch is done; the val line says its step.
  const int64_t total = 2 * int64_t(value_after(r.out, "steps") / 2);  // two equal epochs
  EXPECT_CONTAINS(r.out, fmt::format("epoch 0 ({}%) step 1/{} loss", int(std::lround(100.0 * 2 / total)), total));
  EXPECT_TRUE(std::regex_search(r.out, std::regex("epoch 0 \\([0-9]+%\\) step 1/[0-9]+ loss [^\n]* ETA --\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("epoch 0 \\([0-9]+%\\) step 2/[0-9]+ loss [^\n]* ETA [0-9]+s\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("epoch 1 \\(100%\\) step [0-9]+/[0-9]+ loss"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("epoch 1 step [0-9]+ val loss"))) << r.out;
  // --quiet means no resume line.
  Result q = run("train --resume " + out + " --set train.epochs=3 --quiet");
  ASSERT_EQ(q.rc, 0) << q.out;
  EXPECT_EQ(q.out.find("resuming"), std::string::npos) << q.out;
  // "1 epoch", not "1 epochs".
  Result c = run("data cache " + kExample + kSmall + " --set data.cache=" + (dir / "cache"));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_CONTAINS(c.out, "1 epoch of ");
}

// The char-LSTM example's text is small (~60 KB): unregularised, its validation loss turns up
// after a couple of epochs and keeps rising. The example must regularise and stop early.
TEST(FirstHour, CharLmExampleStopsEarlyAndUsesDropout) {
  TempDir dir;
  Result r = run("train " + source_dir() + "/examples/char_lm.yaml --quiet --set train.max_steps=1 --set "
                 "train.epochs=1 --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string cfg = slurp(dir / "run/config.yaml");
  EXPECT_TRUE(std::regex_search(cfg, std::regex("early_stopping:\n( +#.*\n)* +patience: [1-9]"))) << cfg;
  EXPECT_TRUE(std::regex_search(cfg, std::regex("\n  dropout: 0[.][1-9]"))) << cfg;
}

}  // namespace
}  // namespace seqtrain::testing
