// train.batch_size: auto (train/batch_finder.h; issue 37, part 5), through the binary where it is
// what a user sees: auto stays inside a small runtime.memory_limit and says which larger batch it
// refused, its choice is in config.yaml and the log and a resume keeps it, and a budget below one
// sample is refused naming the key and the budget that fits. The search rule and the config's
// new words (auto, byte sizes) directly.
#include <gtest/gtest.h>

#include <regex>

#include "config/config.h"
#include "config/scalar.h"
#include "test_trainer_util.h"
#include "train/batch_finder.h"

namespace seqtrain::testing {
namespace {

using namespace cli;
Result run(const std::string& args) { return run_seqtrain(args); }

const std::string kExample = example_config();
const std::string kOneEpoch = kSmall + " --set train.epochs=1";

// One candidate line of the batch search's log.
struct LoggedCandidate {
  int64_t batch = 0;
  double mib = 0;  // its total memory
  bool refused = false;
};

double to_mib(double v, const std::string& unit) {
  if (unit == "GiB") return v * 1024;
  if (unit == "KiB") return v / 1024;
  return v;
}

std::vector<LoggedCandidate> logged_candidates(const std::string& log) {
  std::vector<LoggedCandidate> out;
  const std::regex line(R"(batch_size auto:   batch (\d+): ([0-9.]+) (KiB|MiB|GiB) (measured|estimated)[^\n]*)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back({std::stoll(m[1]), to_mib(std::stod(m[2]), m[3]), m.str(0).find("refused") != std::string::npos});
  }
  return out;
}

int64_t logged_choice(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(R"(batch_size auto: train\.batch_size = (\d+))"))) return -1;
  return std::stoll(m[1]);
}

int64_t saved_batch(const std::string& run_dir) {
  std::smatch m;
  const std::string yaml = slurp(run_dir + "/config.yaml");
  if (!std::regex_search(yaml, m, std::regex(R"(\n  batch_size: (\S+)\n)"))) return -1;
  return m[1] == "auto" ? 0 : std::stoll(m[1]);
}

TEST(FinderBatch, AutoStaysInsideASmallBudgetAndSavesItsChoice) {
  TempDir dir;
  const std::string out = dir / "run";
  // 3 MiB: one sample fits (the step's and an evaluation's arena start at 1 MiB each), the
  // training split's 2048 does not.
  Result r = run("train " + kExample + kOneEpoch +
                 " --set train.batch_size=auto --set runtime.memory_limit=3MiB --out " + out);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "memory budget 3.00 MiB (runtime.memory_limit 3MiB)");
  const int64_t chosen = logged_choice(r.out);
  ASSERT_GT(chosen, 0) << r.out;
  EXPECT_EQ(saved_batch(out), chosen);  // config.yaml holds the number, not auto
  bool larger_refused = false, found = false;
  for (const LoggedCandidate& c : logged_candidates(r.out)) {
    if (c.batch == chosen) {
      found = true;
      EXPECT_FALSE(c.refused);
      EXPECT_LE(c.mib * kBatchMemoryMargin, 3.0 + 0.01) << r.out;  // (the log rounds to 0.01 MiB)
    }
    if (c.batch > chosen && c.refused) larger_refused = true;
  }
  EXPECT_TRUE(found) << r.out;
  EXPECT_TRUE(larger_refused) << r.out;
  // The run trained with it: one epoch is ceil(windows / batch) steps.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"((\d+) train / \d+ val)"))) << r.out;
  const int64_t windows = std::stoll(m[1]);
  EXPECT_EQ(value_after(r.out, "steps"), double((windows + chosen - 1) / chosen));
  // Its checkpoints hold it too (state.json's config, a JSON string: its newlines escaped).
  EXPECT_CONTAINS(slurp(out + "/checkpoints/last/state.json"), "batch_size: " + std::to_string(chosen) + "\\n");
}

TEST(FinderBatch, AResumeKeepsTheChosenBatchAndNeverSearchesAgain) {
  TempDir dir;
  const std::string out = dir / "run";
  Result first = run("train " + kExample + kOneEpoch +
                     " --set train.batch_size=auto --set runtime.memory_limit=3MiB --out " + out);
  ASSERT_EQ(first.rc, 0) << first.out;
  const int64_t chosen = saved_batch(out);
  ASSERT_GT(chosen, 0);
  Result more = run("train --resume " + out + " --set train.epochs=2");
  ASSERT_EQ(more.rc, 0) << more.out;
  EXPECT_EQ(more.out.find("memory budget"), std::string::npos) << more.out;
  EXPECT_EQ(saved_batch(out), chosen);
  // Asking for auto again on resume, by --set or by the config file, keeps the run's batch.
  Result again = run("train --resume " + out + " --set train.epochs=3 --set train.batch_size=auto");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_CONTAINS(again.out, "train.batch_size auto: " + std::to_string(chosen) + " as the run chose at its start");
  EXPECT_EQ(again.out.find("memory budget"), std::string::npos) << again.out;
  EXPECT_EQ(saved_batch(out), chosen);
  // `train CONFIG --resume RUN` with auto in CONFIG: no difference to refuse, no search.
  Result with_config = run("train " + kExample + kOneEpoch + " --set train.epochs=4 --set train.batch_size=auto "
                           "--set runtime.memory_limit=3MiB --resume " + out);
  ASSERT_EQ(with_config.rc, 0) << with_config.out;
  EXPECT_EQ(with_config.out.find("memory budget"), std::string::npos) << with_config.out;
  EXPECT_EQ(saved_batch(out), chosen);
}

TEST(FinderBatch, ABudgetBelowOneSampleIsRefusedWithTheBudgetThatFits) {
  TempDir dir;
  const std::string out = dir / "run";
  Result r = run("train " + kExample + kOneEpoch + " --set train.batch_size=auto --set runtime.memory_limit=64KiB --out " + out);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "runtime.memory_limit");
  EXPECT_CONTAINS(r.out, "below what training one sample needs");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(at least ([0-9.]+(KiB|MiB|GiB)))"))) << r.out;
  EXPECT_FALSE(fs::exists(out));  // refused before the run directory exists
  // The budget it names is enough.
  Result ok = run("train " + kExample + kOneEpoch + " --set train.batch_size=auto --set runtime.memory_limit=" +
                  m[1].str() + " --out " + out);
  EXPECT_EQ(ok.rc, 0) << ok.out;
  EXPECT_EQ(saved_batch(out), 1) << ok.out;
}

TEST(FinderBatch, TheSearchStepsOnlyBatchesItExpectsToFitAndTakesTheFastest) {
  // Activations 1000 + 100 B bytes held (100 B used), fixed 500: B fits while (1500 + 100 B) * 1.1 <= budget.
  std::vector<int64_t> stepped;
  BatchSearch s;
  s.budget = static_cast<int64_t>((1500 + 100 * 8) * kBatchMemoryMargin) + 1;  // 8 fits, 16 does not
  s.budget_why = "test";
  s.max_batch = 1024;
  s.weights = 300;
  s.optimizer = 200;
  s.measure = [&](int64_t b) {
    stepped.push_back(b);
    return BatchMeasurement{.activations = size_t(1000 + 100 * b), .used = size_t(100 * b), .buffer_bytes = 0,
                            .samples_per_s = 100.0 * double(b)};
  };
  const BatchChoice c = search_batch_size(s);
  EXPECT_EQ(c.batch, 8);
  EXPECT_EQ(stepped, (std::vector<int64_t>{1, 2, 4, 8}));  // 16 refused by its prediction, never stepped
  ASSERT_EQ(c.candidates.size(), 5u);
  EXPECT_FALSE(c.candidates.back().fits);
  EXPECT_FALSE(c.candidates.back().measured);
  EXPECT_EQ(c.candidates.back().memory.activations, 1000u + 100u * 16u);  // the line through 4 and 8
  // Flat throughput: timing stops after two batches without a 5% gain, and the smallest of the
  // equally fast ones is taken.
  stepped.clear();
  s.budget = int64_t{1} << 40;
  s.measure = [&](int64_t b) {
    stepped.push_back(b);
    return BatchMeasurement{.activations = size_t(1000 + 100 * b), .used = size_t(100 * b), .buffer_bytes = 0,
                            .samples_per_s = b >= 4 ? 1000.0 : 250.0 * double(b)};
  };
  const BatchChoice flat = search_batch_size(s);
  EXPECT_EQ(flat.batch, 4);
  EXPECT_EQ(stepped, (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(flat.candidates.back().batch, 1024);  // fits, estimated, not timed
  EXPECT_TRUE(flat.candidates.back().fits);
  EXPECT_FALSE(flat.candidates.back().samples_per_s.has_value());
  // One sample over the budget: the key and the budget that fits.
  s.budget = 1000;
  const std::string e = error_of([&] { search_batch_size(s); });
  EXPECT_CONTAINS(e, "runtime.memory_limit");
  EXPECT_CONTAINS(e, "Set runtime.memory_limit to at least");
}

TEST(FinderConfig, BatchSizeAutoAndMemoryLimitLoadCheckAndRoundTrip) {
  EXPECT_EQ(parse_bytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_bytes("8 GiB"), int64_t{8} << 30);
  EXPECT_EQ(parse_bytes("1.5kb"), 1500);
  EXPECT_EQ(parse_bytes("1e9"), 1000000000);
  EXPECT_EQ(parse_bytes("4096"), 4096);
  for (const char* bad : {"", "0", "-1MiB", "12 parsecs", "MiB", "1e", "nan"}) EXPECT_FALSE(parse_bytes(bad)) << bad;
  const Config c = load_config("", {"train.batch_size=auto", "runtime.memory_limit=6GiB"});
  EXPECT_EQ(c.train.batch_size, kAutoBatch);
  EXPECT_EQ(c.runtime.memory_limit, "6GiB");
  const std::string yaml = to_yaml(c);
  EXPECT_CONTAINS(yaml, "  batch_size: auto\n");
  EXPECT_CONTAINS(yaml, "  memory_limit: 6GiB\n");
  EXPECT_EQ(load_config_text(yaml, "config.yaml", "."), c);
  EXPECT_CONTAINS(error_of([] { load_config("", {"train.batch_size=0"}); }), "expects an integer >= 1 or auto");
  EXPECT_CONTAINS(error_of([] { load_config("", {"runtime.memory_limit=lots"}); }), "runtime.memory_limit");
}

}  // namespace
}  // namespace seqtrain::testing
