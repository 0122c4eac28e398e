// data.source npy and the pre-augmentation cache through `seqtrain train` and `seqtrain data`:
// regression and classification jobs on files numpy wrote (tests/py/npy_dataset.py) train end
// to end; the batches of an npy plan are numpy's z-scored arrays and identical for 0, 1 and 4
// workers; the cache hits on a second use and misses after a source file or a data setting
// changes; a cached run trains exactly like an uncached one; `data info` lists what was built;
// bad input (X/y mismatch, missing glob, Fortran order, unwritable cache dir, a crash while
// writing the cache) exits non-zero naming the key and file and leaves nothing half-written;
// data.source text trains the char LM end to end, and bad text is refused the same way.
// `seqtrain eval` scores npy and text runs like the trainer's test record, and `predict` writes
// an npy run's outputs as .npy (regression MSE and classification accuracy match eval's).
#include <gtest/gtest.h>

#include <fstream>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/loader.h"
#include "data/npy.h"
#include "test_trainer_util.h"
#include "train/data_plan.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

bool numpy_available() {
  static int ok = -1;
  if (ok < 0) ok = run_command("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return ok == 1;
}

#define REQUIRE_NUMPY()                                                                \
  do {                                                                                 \
    if (!numpy_available()) GTEST_SKIP() << "python3-numpy is not installed; skipped"; \
  } while (0)

// Writes the numpy data sets into dir (reg/ and cls/).
void write_sets(const TempDir& dir) {
  ASSERT_EQ(run_python("npy_dataset.py", dir.path.string()), 0) << "tests/py/npy_dataset.py failed";
}

// A config for the npy set in `set_dir` (reg or cls), small enough to train in seconds.
std::string npy_config(const TempDir& dir, const std::string& set, const std::string& extra = "") {
  const std::string d = dir / set;
  const bool cls = set == "cls";
  return write_file(dir, set + ".yaml",
                    "seed: 3\n"
                    "data:\n"
                    "  source: npy\n"
                    "  workers: 0\n"
                    "  npy:\n"
                    "    train_x: " + d + "/train_*_x.npy\n"
                    "    train_y: " + d + "/train_*_y.npy\n"
                    "    val_x: " + d + "/val_x.npy\n"
                    "    val_y: " + d + "/val_y.npy\n"
                    "    test_x: " + d + "/test_x.npy\n"
                    "    test_y: " + d + "/test_y.npy\n" + extra +
                    "model:\n  hidden: 16\n"
                    "train:\n  epochs: 12\n  batch_size: 32\n  log_every: 4\n  loss: " +
                    (cls ? "cross_entropy" : "mse") + "\n  optimizer:\n    lr: 0.01\n"
                    "runtime:\n  threads: 1\n  deterministic: true\n");
}

// A CSV's header line and first data line.
std::pair<std::string, std::string> header_and_first_row(const std::string& path) {
  std::ifstream rows(path);
  std::string header, first;
  std::getline(rows, header);
  std::getline(rows, first);
  return {header, first};
}

std::vector<nlohmann::json> records(const std::string& run, const std::string& split) {
  std::vector<nlohmann::json> out;
  for (auto& r : read_metrics(run + "/metrics.jsonl"))
    if (r["split"] == split) out.push_back(r);
  return out;
}

TEST(CliData, RegressionOnNpyFilesTrainsEndToEndAndSavesNumpysStatistics) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  const std::string run = dir / "run";
  Result r = run_seqtrain("train " + npy_config(dir, "reg") + " --out " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "256 train / 64 val / 64 test samples");
  const auto train = records(run, "train"), val = records(run, "val"), test = records(run, "test");
  ASSERT_GE(train.size(), 4u);
  ASSERT_EQ(val.size(), 12u);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_LT(train.back()["loss"].get<double>(), 0.5 * train.front()["loss"].get<double>());
  EXPECT_LT(val.back()["loss"].get<double>(), 0.5 * val.front()["loss"].get<double>());
  EXPECT_FALSE(val.front().contains("accuracy"));
  // The z-score statistics in state.json are numpy's over both train files.
  const auto stats = nlohmann::json::parse(slurp(dir / "reg/stats.json"));
  const auto st = nlohmann::json::parse(slurp(run + "/checkpoints/best/state.json"));
  ASSERT_EQ(st["normalizer"]["shift"].size(), 3u);
  for (int f = 0; f < 3; ++f) {
    EXPECT_NEAR(st["normalizer"]["shift"][f].get<double>(), stats["mean"][f].get<double>(), 1e-9);
    EXPECT_NEAR(st["normalizer"]["scale"][f].get<double>(), stats["std"][f].get<double>(), 1e-9);
  }
  // predict: y-shaped predictions for every test sample; their MSE against test_y is eval's loss.
  const std::string pred = dir / "pred.npy";
  Result p = run_seqtrain("predict " + run + " --input " + (dir / "reg/test_x.npy") + " --output " + pred);
  ASSERT_EQ(p.rc, 0) << p.out;
  const NpyArray out = open_npy(pred), y = open_npy(dir / "reg/test_y.npy");
  EXPECT_EQ(out.shape, y.shape);  // [64, 2, 1]
  double se = 0;
  for (int64_t i = 0; i < y.count; ++i) se += (out.at(i) - y.at(i)) * (out.at(i) - y.at(i));
  Result eval = run_seqtrain("eval " + run);
  ASSERT_EQ(eval.rc, 0) << eval.out;
  EXPECT_NEAR(se / y.count, value_after(eval.out, "loss"), 1e-5 * value_after(eval.out, "loss") + 1e-6);
  // eval of the same X and y given as new data (--input --labels) is eval of the test split.
  Result again = run_seqtrain("eval " + run + " --input " + (dir / "reg/test_x.npy") + " --labels " +
                              (dir / "reg/test_y.npy"));
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_NEAR(value_after(again.out, "loss"), value_after(eval.out, "loss"), 1e-6);
  // Bad input writes nothing: other features than the run's, an output that is neither .npy nor
  // .csv, a CSV given for the npy run's X.
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import numpy as np; np.save('" + (dir / "x4.npy") +
                        "', np.zeros((5, 12, 4), dtype=np.float32))\""), 0);
  Result wrong = run_seqtrain("predict " + run + " --input " + (dir / "x4.npy") + " --output " + (dir / "w.npy"));
  EXPECT_EQ(wrong.rc, 2) << wrong.out;
  EXPECT_CONTAINS(wrong.out, "12 steps x 4 features, but the run was trained on 12 x 3");
  EXPECT_FALSE(fs::exists(dir / "w.npy"));
  Result txt = run_seqtrain("predict " + run + " --input " + (dir / "reg/test_x.npy") + " --output " + (dir / "p.txt"));
  EXPECT_EQ(txt.rc, 2) << txt.out;
  EXPECT_CONTAINS(txt.out, "give a path ending in one");
  EXPECT_FALSE(fs::exists(dir / "p.txt"));
  const std::string a_csv = write_file(dir, "a.csv", "a,b\n1,2\n");
  Result csv_in = run_seqtrain("predict " + run + " --input " + a_csv + " --output " + (dir / "q.npy"));
  EXPECT_EQ(csv_in.rc, 2) << csv_in.out;
  EXPECT_CONTAINS(csv_in.out, "is not a .npy array");
  EXPECT_CONTAINS(csv_in.out, "trained on npy arrays (data.source npy)");
  EXPECT_FALSE(fs::exists(dir / "q.npy"));
  // A .csv output: one row per sample, y_<j> columns, the values of the .npy.
  Result csv = run_seqtrain("predict " + run + " --input " + (dir / "reg/test_x.npy") + " --output " + (dir / "p.csv"));
  ASSERT_EQ(csv.rc, 0) << csv.out;
  const auto [header, first] = header_and_first_row(dir / "p.csv");
  EXPECT_EQ(header, "y_0,y_1");
  EXPECT_NEAR(std::stod(first.substr(0, first.find(','))), out.at(0), 1e-5 * std::abs(out.at(0)) + 1e-6);
}

// An npy run stopped after 2 epochs and resumed to 4 writes the records of an uninterrupted
// 4-epoch run (the normalizer check and the data position hold for npy too). `eval` scores the
// run's test split exactly as the trainer's test record did, refuses --input and training files
// that changed since.
TEST(CliData, NpyRunResumesToTheUninterruptedRecords) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  const std::string cfg = npy_config(dir, "reg") + " --quiet --set train.shuffle=true";
  ASSERT_EQ(run_seqtrain("train " + cfg + " --set train.epochs=4 --out " + (dir / "a")).rc, 0);
  ASSERT_EQ(run_seqtrain("train " + cfg + " --set train.epochs=2 --out " + (dir / "b")).rc, 0);
  Result resumed = run_seqtrain("train --resume " + (dir / "b") + " --set train.epochs=4");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_CONTAINS(resumed.out, "resuming");
  EXPECT_EQ(timeless(read_metrics(dir / "b/metrics.jsonl")), timeless(read_metrics(dir / "a/metrics.jsonl")));
  Result eval = run_seqtrain("eval " + (dir / "a"));
  ASSERT_EQ(eval.rc, 0) << eval.out;
  EXPECT_EQ(value_after(eval.out, "samples"), 64);
  const double test_loss = records(dir / "a", "test").back()["loss"].get<double>();
  EXPECT_NEAR(value_after(eval.out, "loss"), test_loss, 1e-6 + 1e-5 * test_loss);
  EXPECT_EQ(eval.out.find("accuracy"), std::string::npos) << "regression has no accuracy";
  // --split val: the best checkpoint is the epoch with the lowest validation loss.
  Result val = run_seqtrain("eval " + (dir / "a") + " --split val");
  ASSERT_EQ(val.rc, 0) << val.out;
  double best_val = 1e300;
  for (const auto& r : records(dir / "a", "val")) best_val = std::min(best_val, r["loss"].get<double>());
  EXPECT_NEAR(value_after(val.out, "loss"), best_val, 1e-6 + 1e-5 * best_val);

  Result with_input = run_seqtrain("eval " + (dir / "a") + " --input " + (dir / "reg/stats.json"));
  EXPECT_EQ(with_input.rc, 2) << with_input.out;
  EXPECT_CONTAINS(with_input.out, "--input");

  // A training file rewritten since: other z-score statistics, so the scores would mean nothing.
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import numpy as np; p='" + (dir / "reg/train_0_x.npy") +
                        "'; np.save(p, np.load(p) * 2 + 1)\""), 0);
  Result changed = run_seqtrain("eval " + (dir / "a"));
  EXPECT_EQ(changed.rc, 2) << changed.out;
  EXPECT_CONTAINS(changed.out, "changed since this run was trained");
}

TEST(CliData, ClassificationOnNpyLabelsTrainsWithCrossEntropyAndReportsAccuracy) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  const std::string run = dir / "run";
  Result r = run_seqtrain("train " + npy_config(dir, "cls") + " --out " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "(3 classes)");
  const auto train = records(run, "train"), val = records(run, "val"), test = records(run, "test");
  ASSERT_EQ(val.size(), 12u);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_LT(train.back()["loss"].get<double>(), train.front()["loss"].get<double>());
  EXPECT_LT(val.back()["loss"].get<double>(), val.front()["loss"].get<double>());
  ASSERT_TRUE(val.back().contains("accuracy"));
  // Three roughly balanced classes: chance is about 1/3.
  EXPECT_GT(val.back()["accuracy"].get<double>(), 0.6);
  EXPECT_GE(val.back()["accuracy"].get<double>(), val.front()["accuracy"].get<double>());
  EXPECT_TRUE(test.back().contains("accuracy"));
  Result eval = run_seqtrain("eval " + run);
  ASSERT_EQ(eval.rc, 0) << eval.out;
  EXPECT_NEAR(value_after(eval.out, "loss"), test.back()["loss"].get<double>(), 1e-5);
  EXPECT_NEAR(value_after(eval.out, "accuracy"), test.back()["accuracy"].get<double>(), 1e-6);
  // predict: [64, 3] logits; their argmax agrees with the labels as often as eval says.
  const std::string pred = dir / "logits.npy";
  Result p = run_seqtrain("predict " + run + " --input " + (dir / "cls/test_x.npy") + " --output " + pred);
  ASSERT_EQ(p.rc, 0) << p.out;
  const NpyArray logits = open_npy(pred), labels = open_npy(dir / "cls/test_y.npy");
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{64, 3}));
  int64_t correct = 0;
  for (int64_t i = 0; i < 64; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < 3; ++c)
      if (logits.at(i * 3 + c) > logits.at(i * 3 + best)) best = c;
    correct += best == static_cast<int64_t>(labels.at(i));
  }
  EXPECT_NEAR(correct / 64.0, value_after(eval.out, "accuracy"), 1e-9);
  // Beside the logits: probabilities (rows of 1, the softmax of the logits) and the labels.
  const NpyArray probs = open_npy(dir / "logits.probs.npy"), predicted = open_npy(dir / "logits.labels.npy");
  ASSERT_EQ(probs.shape, (std::vector<int64_t>{64, 3}));
  ASSERT_EQ(predicted.shape, (std::vector<int64_t>{64}));
  for (int64_t i = 0; i < 64; ++i) {
    double sum = 0, z = 0;
    for (int64_t c = 0; c < 3; ++c) sum += probs.at(i * 3 + c), z += std::exp(logits.at(i * 3 + c));
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_NEAR(probs.at(i * 3 + 1), std::exp(logits.at(i * 3 + 1)) / z, 1e-5);
    int64_t best = 0;
    for (int64_t c = 1; c < 3; ++c)
      if (logits.at(i * 3 + c) > logits.at(i * 3 + best)) best = c;
    EXPECT_EQ(static_cast<int64_t>(predicted.at(i)), best);
  }
  // As CSV: label, prob_<c>, logit_<c>.
  Result c = run_seqtrain("predict " + run + " --input " + (dir / "cls/test_x.npy") + " --output " + (dir / "p.csv"));
  ASSERT_EQ(c.rc, 0) << c.out;
  const auto [header, first] = header_and_first_row(dir / "p.csv");
  EXPECT_EQ(header, "label,prob_0,prob_1,prob_2,logit_0,logit_1,logit_2");
  EXPECT_EQ(first.substr(0, first.find(',')), std::to_string(static_cast<int64_t>(predicted.at(0))));
  // New labelled data: the test files as --input/--labels give eval's accuracy; bad labels are named.
  Result e2 = run_seqtrain("eval " + run + " --input " + (dir / "cls/test_x.npy") + " --labels " + (dir / "cls/test_y.npy"));
  ASSERT_EQ(e2.rc, 0) << e2.out;
  EXPECT_NEAR(value_after(e2.out, "accuracy"), value_after(eval.out, "accuracy"), 1e-9);
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import numpy as np; np.save('" + (dir / "bad_y.npy") +
                        "', np.full(64, 7, dtype=np.int64))\""), 0);
  Result e3 = run_seqtrain("eval " + run + " --input " + (dir / "cls/test_x.npy") + " --labels " + (dir / "bad_y.npy"));
  EXPECT_EQ(e3.rc, 2) << e3.out;
  EXPECT_CONTAINS(e3.out, "is not a class of this model (0 to 2)");
  Result e4 = run_seqtrain("eval " + run + " --input " + (dir / "cls/test_x.npy"));
  EXPECT_EQ(e4.rc, 2) << e4.out;
  EXPECT_CONTAINS(e4.out, "needs --labels");
}

// Batches of the plan's train split: numpy's z-scored X in file order, and the same bytes
// for 0, 1 and 4 workers with shuffle and augmentation on.
TEST(CliData, NpyBatchesMatchNumpyAndAreIdenticalForZeroOneAndFourWorkers) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  Config c = load_config(npy_config(dir, "reg"));
  const DataPlan plan = plan_data(c);
  ASSERT_EQ(plan.train->size(), 256);
  ASSERT_EQ(plan.steps, 12);
  ASSERT_EQ(plan.features, 3);
  ASSERT_EQ(plan.outputs, 2);
  const NpyArray ref = open_npy(dir / "reg/train_norm.npy");
  std::vector<float> x(plan.train->x_size()), y(plan.train->y_size());
  for (int64_t i : {0, 159, 160, 255}) {  // both sides of the file boundary
    const int64_t idx[1] = {i};
    plan.train->fill(idx, 0, x.data(), y.data());
    for (int64_t k = 0; k < plan.train->x_size(); ++k)
      ASSERT_NEAR(x[k], ref.at(i * plan.train->x_size() + k), 2e-6) << "sample " << i << " value " << k;
  }

  c.data.augment.jitter_sigma = 0.1;
  c.data.augment.shift_max = 2;
  auto batches = [&](int64_t workers) {
    const TrainFeed feed = training_feed(plan, c, workers);
    Loader loader(*feed.source, LoaderOptions{.workers = workers, .prefetch = 2, .batch_size = 24, .shuffle = true,
                                              .seed = 11});
    std::vector<float> all;
    for (int64_t e = 0; e < 2; ++e) {
      loader.start_epoch(e);
      while (const Batch* b = loader.next()) {
        all.insert(all.end(), b->x, b->x + b->count * feed.source->x_size());
        all.insert(all.end(), b->y, b->y + b->count * feed.source->y_size());
        loader.release(b);
      }
    }
    return all;
  };
  const auto w0 = batches(0);
  EXPECT_EQ(w0.size(), size_t(2 * 256 * (36 + 2)));
  EXPECT_EQ(batches(1), w0);
  EXPECT_EQ(batches(4), w0);
}

// The key of the cache `seqtrain data cache` built, from its output.
std::string cache_file(const std::string& out) {
  const auto p = out.find("cache: ");
  EXPECT_NE(p, std::string::npos) << out;
  return p == std::string::npos ? "" : out.substr(p + 7, out.find('\n', p) - p - 7);
}

TEST(CliData, CacheHitsOnSecondUseAndMissesAfterTouchingTheSourceOrASetting) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  const std::string cache = dir / "cache";
  const std::string cfg = npy_config(dir, "reg", "  cache: " + cache + "\n  cache_epochs: 2\n  augment:\n"
                                                 "    jitter_sigma: 0.05\n");
  Result first = run_seqtrain("data cache " + cfg);
  ASSERT_EQ(first.rc, 0) << first.out;
  EXPECT_CONTAINS(first.out, "hit: false");
  EXPECT_CONTAINS(first.out, "data cache miss");
  const std::string path = cache_file(first.out);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(fs::file_size(path), 64 + 2 * 256 * (36 + 2) * 4 + 16);

  Result second = run_seqtrain("data cache " + cfg);
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_CONTAINS(second.out, "hit: true");
  EXPECT_EQ(cache_file(second.out), path);

  // The trainer finds the same file.
  Result trained = run_seqtrain("train " + cfg + " --set train.epochs=1 --out " + (dir / "run"));
  ASSERT_EQ(trained.rc, 0) << trained.out;
  EXPECT_CONTAINS(trained.out, "data cache hit: " + path);

  // A data setting changes the key: a miss into a new file.
  Result setting = run_seqtrain("data cache " + cfg + " --set data.augment.jitter_sigma=0.06");
  ASSERT_EQ(setting.rc, 0) << setting.out;
  EXPECT_CONTAINS(setting.out, "hit: false");
  EXPECT_NE(cache_file(setting.out), path);

  // So does the content of a source file (same name, same shape, one value changed), and the
  // trainer says miss too.
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import numpy as np; p='" + (dir / "reg/train_1_x.npy") +
                        "'; a=np.load(p); a[5, 3, 1] += 1; np.save(p, a)\""), 0);
  Result touched = run_seqtrain("train " + cfg + " --set train.epochs=1 --out " + (dir / "run2"));
  ASSERT_EQ(touched.rc, 0) << touched.out;
  EXPECT_CONTAINS(touched.out, "data cache miss");
  EXPECT_EQ(touched.out.find(path), std::string::npos) << touched.out;

  Result info = run_seqtrain("data info " + cache);
  ASSERT_EQ(info.rc, 0) << info.out;
  EXPECT_CONTAINS(info.out, fs::path(path).stem().string());
  EXPECT_CONTAINS(info.out, "npy: 8 file(s), X [N, 12, 3], y [N, 2, 1]");
  int rows = 0;
  for (size_t p = info.out.find('\n'); p != std::string::npos; p = info.out.find('\n', p + 1)) ++rows;
  EXPECT_EQ(rows, 4) << info.out;  // a header and three caches
  EXPECT_EQ(info.out.find("incomplete"), std::string::npos) << info.out;
}

// With cache_epochs >= epochs the cache holds exactly the batches the run would compute, so a
// cached run's records equal an uncached one's (augmentation on, shuffled, synthetic source).
TEST(CliData, CachedRunTrainsExactlyLikeAnUncachedRun) {
  TempDir dir;
  const std::string args = "train " + example_config() + kSmall +
                           " --set train.epochs=3 --set data.augment.jitter_sigma=0.05 --set data.workers=0"
                           " --set runtime.deterministic=true --quiet";
  ASSERT_EQ(run_seqtrain(args + " --out " + (dir / "plain")).rc, 0);
  const std::string cached = args + " --set data.cache=" + (dir / "cache") + " --set data.cache_epochs=3";
  Result a = run_seqtrain(cached + " --out " + (dir / "a"));
  ASSERT_EQ(a.rc, 0) << a.out;
  Result b = run_seqtrain(cached + " --out " + (dir / "b"));
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(timeless(read_metrics(dir / "a/metrics.jsonl")), timeless(read_metrics(dir / "plain/metrics.jsonl")));
  EXPECT_EQ(timeless(read_metrics(dir / "b/metrics.jsonl")), timeless(read_metrics(dir / "plain/metrics.jsonl")));
  Result info = run_seqtrain("data info " + (dir / "cache"));
  EXPECT_CONTAINS(info.out, "synthetic: 3000 rows");
}

// Bad input: exit 2 naming the key and the file, no run directory, no cache file.
TEST(CliData, BadNpyInputIsAClearErrorThatWritesNothing) {
  REQUIRE_NUMPY();
  TempDir dir;
  write_sets(dir);
  const std::string run = dir / "run";
  auto expect_refused = [&](const std::string& extra, std::initializer_list<std::string> parts) {
    Result r = run_seqtrain("train " + npy_config(dir, "reg") + extra + " --out " + run);
    EXPECT_EQ(r.rc, 2) << r.out;
    for (const auto& p : parts) EXPECT_CONTAINS(r.out, p);
    EXPECT_FALSE(fs::exists(run)) << extra;
  };
  // X and y of a split disagree on N.
  expect_refused(" --set data.npy.val_y=" + (dir / "reg/train_0_y.npy"),
                 {"data.npy.val_x / data.npy.val_y", "val_x.npy", "train_0_y.npy", "same first dimension"});
  // A glob that matches nothing.
  expect_refused(" --set data.npy.test_x=" + (dir / "reg/nothing_*.npy"), {"data.npy.test_x", "nothing_*.npy"});
  // Files of one split with different [T, F].
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import numpy as np; np.save('" + (dir / "reg/train_2_x.npy") +
                        "', np.zeros((4, 6, 3), np.float32)); np.save('" + (dir / "reg/train_2_y.npy") +
                        "', np.zeros((4, 2, 1), np.float32)); np.save('" + (dir / "fortran_x.npy") +
                        "', np.asfortranarray(np.zeros((64, 12, 3), np.float32)))\""), 0);
  expect_refused("", {"data.npy.train_x", "train_2_x.npy", "6 steps x 3 features", "same [T, F]"});
  fs::remove(dir / "reg/train_2_x.npy");
  fs::remove(dir / "reg/train_2_y.npy");
  // Fortran order.
  expect_refused(" --set data.npy.val_x=" + (dir / "fortran_x.npy"), {"data.npy.val_x", "fortran_x.npy", "Fortran"});
  // Labels with a regression loss, and cross-entropy on a regression y.
  expect_refused(" --set data.npy.train_y=" + (dir / "cls/train_*_y.npy") + " --set data.npy.val_y=" +
                     (dir / "cls/val_y.npy") + " --set data.npy.test_y=" + (dir / "cls/test_y.npy"),
                 {"class labels", "train.loss: cross_entropy"});
  expect_refused(" --set train.loss=cross_entropy", {"train.loss is cross_entropy", "[N, 2, 1]"});
  // A label beyond data.npy.classes.
  {
    Result r = run_seqtrain("train " + npy_config(dir, "cls") + " --set data.npy.classes=2 --out " + run);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_CONTAINS(r.out, "outside data.npy.classes = 2");
    EXPECT_FALSE(fs::exists(run));
  }
  // A val X without its y.
  expect_refused(" --set data.npy.val_y=", {"data.npy.val_x", "data.npy.val_y"});
  // An unwritable cache directory (below a regular file): no cache, no run.
  const std::string blocker = write_file(dir, "blocker", "x");
  expect_refused(" --set data.cache=" + blocker + "/cache", {"data.cache", blocker});
  Result cache = run_seqtrain("data cache " + npy_config(dir, "reg") + " --set data.cache=" + blocker + "/cache");
  EXPECT_EQ(cache.rc, 2) << cache.out;
  EXPECT_CONTAINS(cache.out, "data.cache");
  Result none = run_seqtrain("data cache " + npy_config(dir, "reg"));
  EXPECT_EQ(none.rc, 2);
  EXPECT_CONTAINS(none.out, "data.cache");
}

// kill -9 while `seqtrain data cache` writes: only a .tmp file can remain, `data info` shows
// no cache from it, and the next `data cache` is a miss that builds a whole file.
TEST(CliData, KillNineWhileWritingTheCacheLeavesNoUsableFile) {
  TempDir dir;
  const std::string cache = dir / "cache";
  const std::string args = "data cache " + example_config() +
                           " --set data.synthetic.rows=20000 --set data.lookback=48 --set data.cache=" + cache +
                           " --set data.cache_epochs=12 --set data.augment.warp_sigma=0.1 --set data.workers=0";
  pid_t pid = spawn_seqtrain(args, dir / "log");
  auto tmp_file = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache, ec))
      if (e.path().string().find(".stcache.tmp.") != std::string::npos && fs::file_size(e.path()) > 4096) return true;
    return false;
  };
  ASSERT_TRUE(wait_until([&] { return tmp_file() || !running(pid); }, 120));
  ASSERT_TRUE(running(pid)) << "the cache was written before the test could kill the writer:\n" << slurp(dir / "log");
  kill(pid, SIGKILL);
  wait_status(pid);
  for (const auto& e : fs::directory_iterator(cache))
    EXPECT_NE(e.path().filename().string().find(".stcache.tmp."), std::string::npos)
        << "only the temporary file may remain: " << e.path();
  Result info = run_seqtrain("data info " + cache);
  EXPECT_CONTAINS(info.out, "no data caches");
  Result again = run_seqtrain(args);
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_CONTAINS(again.out, "hit: false");
  Result hit = run_seqtrain(args);
  EXPECT_CONTAINS(hit.out, "hit: true");
  // A final file cut short (a copy gone wrong, a failing disk) is listed as incomplete and rebuilt.
  const std::string path = cache_file(hit.out);
  fs::resize_file(path, fs::file_size(path) - 100);
  EXPECT_CONTAINS(run_seqtrain("data info " + cache).out, "incomplete");
  Result rebuilt = run_seqtrain(args);
  EXPECT_CONTAINS(rebuilt.out, "hit: false");
  EXPECT_CONTAINS(rebuilt.out, "incomplete or did not match");
  EXPECT_EQ(run_seqtrain("data info " + cache).out.find("incomplete"), std::string::npos);
}

// A disk that fills up while the cache is written: simulated with a file-size limit
// (ulimit -f; SIGXFSZ ignored, so write() fails with EFBIG as it would with ENOSPC).
TEST(CliData, DiskFullWhileWritingTheCacheIsAClearErrorAndLeavesNoFile) {
  TempDir dir;
  const std::string cache = dir / "cache", log = dir / "log";
  const std::string args = "data cache " + example_config() +
                           " --set data.synthetic.rows=20000 --set data.lookback=48 --set data.cache=" + cache +
                           " --set data.cache_epochs=4 --set data.workers=0";
  const int rc = run_command("trap '' XFSZ; ulimit -f 64; exec " + seqtrain_binary() + " " + args + " > " + log +
                             " 2>&1");
  const std::string out = slurp(log);
  EXPECT_NE(rc, 0) << out;
  EXPECT_CONTAINS(out, "writing the data cache failed");
  EXPECT_CONTAINS(out, "free disk space or point data.cache elsewhere");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(cache)) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
  EXPECT_CONTAINS(run_seqtrain("data info " + cache).out, "no data caches");
}

// A word salad with one two-byte character, so the char vocabulary is not just bytes.
std::string word_text(int words) {
  const char* vocab[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "\xc3\xb6l"};
  std::string out;
  uint64_t s = 12345;
  for (int i = 0; i < words; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    out += std::string(vocab[(s >> 33) % 11]) + (i % 17 == 16 ? "\n" : " ");
  }
  return out;
}

std::string text_config(const TempDir& dir, const std::string& text_path) {
  return write_file(dir, "text.yaml",
                    "data:\n  source: text\n  path: " + text_path +
                        "\n  block_size: 16\n  stride: 8\n  workers: 0\n"
                        "model:\n  hidden: 32\n"
                        "train:\n  epochs: 4\n  batch_size: 32\n  log_every: 10\n  loss: cross_entropy\n"
                        "  optimizer:\n    lr: 0.01\n"
                        "runtime:\n  threads: 1\n  deterministic: true\n");
}

// data.source text trains the char LM end to end: next-token loss over every position falls
// far below the uniform guess, val records report per-token accuracy, the vocabulary is saved
// with the checkpoint, and a resumed run ends with the uninterrupted run's records.
TEST(CliData, TextTrainsTheCharLmOnEveryNextToken) {
  TempDir dir;
  const std::string text = word_text(3000);
  const std::string cfg = text_config(dir, write_file(dir, "words.txt", text));
  const std::string run = dir / "run";
  Result r = run_seqtrain("train " + cfg + " --out " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "char vocabulary of 17 ids");  // <unk>, space, newline, 13 letters, ö
  const auto val = records(run, "val");
  ASSERT_EQ(val.size(), 4u);
  EXPECT_LT(val.back()["loss"].get<double>(), val.front()["loss"].get<double>());
  EXPECT_LT(val.back()["loss"].get<double>(), 0.5 * std::log(17.0));
  EXPECT_GT(val.back()["accuracy"].get<double>(), 0.5);
  ASSERT_EQ(records(run, "test").size(), 1u);
  EXPECT_CONTAINS(r.out, "test_accuracy: ");
  EXPECT_EQ(r.out.find("baseline_last_value"), std::string::npos) << "a forecasting-only figure on a char LM run";
  const auto st = nlohmann::json::parse(slurp(run + "/checkpoints/best/state.json"));
  EXPECT_EQ(st["vocab"]["kind"], "char");
  EXPECT_EQ(st["vocab"]["size"], 17);
  EXPECT_EQ(st["vocab"]["code_points"].back(), 0xf6);
  // eval: the test record's loss and accuracy, and the perplexity e^loss.
  Result eval = run_seqtrain("eval " + run);
  ASSERT_EQ(eval.rc, 0) << eval.out;
  const auto test = records(run, "test").back();
  EXPECT_NEAR(value_after(eval.out, "loss"), test["loss"].get<double>(), 1e-5);
  EXPECT_NEAR(value_after(eval.out, "accuracy"), test["accuracy"].get<double>(), 1e-6);
  EXPECT_NEAR(value_after(eval.out, "perplexity"), std::exp(test["loss"].get<double>()), 1e-4);
  Result predict = run_seqtrain("predict " + run + " --input " + (dir / "words.txt") + " --output " + (dir / "p.npy"));
  EXPECT_EQ(predict.rc, 2) << predict.out;
  EXPECT_CONTAINS(predict.out, "seqtrain generate");

  const std::string b = dir / "b";
  ASSERT_EQ(run_seqtrain("train " + cfg + " --quiet --set train.epochs=2 --out " + b).rc, 0);
  Result resumed = run_seqtrain("train --resume " + b + " --set train.epochs=4");
  ASSERT_EQ(resumed.rc, 0) << resumed.out;
  EXPECT_EQ(timeless(read_metrics(b + "/metrics.jsonl")), timeless(read_metrics(run + "/metrics.jsonl")));
}

TEST(CliData, BadTextInputIsAClearErrorThatWritesNothing) {
  TempDir dir;
  const std::string run = dir / "run";
  auto refused = [&](const std::string& cfg, const std::string& extra, std::initializer_list<std::string> parts) {
    Result r = run_seqtrain("train " + cfg + extra + " --out " + run);
    EXPECT_EQ(r.rc, 2) << r.out;
    for (const auto& p : parts) EXPECT_CONTAINS(r.out, p);
    EXPECT_FALSE(fs::exists(run));
  };
  // Latin-1 bytes: not UTF-8, reported with the byte offset; byte vocabularies accept them.
  const std::string latin1 = write_file(dir, "latin1.txt", word_text(200) + "caf\xe9 " + word_text(20));
  refused(text_config(dir, latin1), "", {"data.path", "latin1.txt", "invalid UTF-8 at byte"});
  EXPECT_EQ(run_seqtrain("train " + text_config(dir, latin1) + " --quiet --set data.vocab=byte --set train.epochs=1"
                         " --out " + run).rc, 0);
  fs::remove_all(run);
  // Too short for one block in the val split.
  refused(text_config(dir, write_file(dir, "short.txt", word_text(30))), " --set data.block_size=40",
          {"short.txt", "val split", "data.block_size"});
  refused(text_config(dir, write_file(dir, "ok.txt", word_text(300))), " --set train.loss=mse",
          {"train.loss", "cross_entropy"});
  refused(text_config(dir, dir / "ok.txt"), " --set data.augment.shift_max=2", {"data.augment.shift_max"});
}

}  // namespace
}  // namespace seqtrain::testing
