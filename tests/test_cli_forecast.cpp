// `seqtrain forecast` (issue 33, item 1): the horizon after a CSV history's last row equals
// predict's forecast for the window that ends there (predict needs the future in the file,
// forecast does not); in the targets' units, stdout or --output; a history shorter than the
// lookback and a run that is no windowed forecaster are clear errors that write nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<double> numbers(const std::string& csv_line) {
  std::vector<double> out;
  std::istringstream in(csv_line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(std::stod(cell));
  return out;
}

TEST(Forecast, TheStepsAfterAHistoryArePredictsLastWindow) {
  TempDir dir;
  const std::string run = dir / "run", full = dir / "full.csv", history = dir / "history.csv";
  ASSERT_EQ(run_seqtrain("train " + example_config() + kSmall + " --set train.epochs=1 --quiet --out " + run).rc, 0);
  ASSERT_EQ(run_seqtrain("data export " + example_config() + kSmall + " --out " + full).rc, 0);
  // The history: every row of the file but the last horizon (4) rows.
  const std::vector<std::string> rows = lines_of(slurp(full));
  const int64_t H = 4, L = 24;
  std::string text;
  for (size_t i = 0; i + H < rows.size(); ++i) text += rows[i] + "\n";
  write_file(dir, "history.csv", text);
  ASSERT_EQ(run_seqtrain("predict " + run + " --input " + full + " --output " + (dir / "p.csv")).rc, 0);
  const std::vector<double> want = numbers(lines_of(slurp(dir / "p.csv")).back());  // voltage_t+1 .. t+4
  Result f = run_seqtrain("forecast " + run + " --input " + history);
  ASSERT_EQ(f.rc, 0) << f.out;
  const std::vector<std::string> got = lines_of(f.out);
  ASSERT_EQ(got.size(), static_cast<size_t>(H + 1)) << f.out;
  EXPECT_EQ(got[0], "step,voltage");
  const int64_t n = static_cast<int64_t>(rows.size()) - 1 - H;  // data rows of the history
  for (int64_t h = 0; h < H; ++h) {
    const std::vector<double> row = numbers(got[h + 1]);
    EXPECT_EQ(row[0], n + h);
    EXPECT_NEAR(row[1], want[h], 1e-5 * std::abs(want[h]) + 1e-6) << "step " << h;
  }
  // --output writes the same file; only the last lookback rows matter.
  std::string tail = rows[0] + "\n";
  for (size_t i = rows.size() - H - L; i + H < rows.size(); ++i) tail += rows[i] + "\n";
  write_file(dir, "tail.csv", tail);
  Result o = run_seqtrain("forecast " + run + " --input " + (dir / "tail.csv") + " --output " + (dir / "f.csv"));
  ASSERT_EQ(o.rc, 0) << o.out;
  const std::vector<std::string> out = lines_of(slurp(dir / "f.csv"));
  for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(numbers(out[h + 1])[1], numbers(got[h + 1])[1], 1e-6);
  // Too short a history names both lengths; nothing is written.
  std::string short_text = rows[0] + "\n";
  for (int i = 1; i <= 10; ++i) short_text += rows[i] + "\n";
  write_file(dir, "short.csv", short_text);
  Result s = run_seqtrain("forecast " + run + " --input " + (dir / "short.csv") + " --output " + (dir / "s.csv"));
  EXPECT_EQ(s.rc, 2) << s.out;
  EXPECT_CONTAINS(s.out, "the history has 10 rows, but the model reads the last 24 (data.lookback)");
  EXPECT_FALSE(fs::exists(dir / "s.csv"));
}

}  // namespace
}  // namespace seqtrain::testing
