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

// eval's forecast metrics (issue 33, item 2, for `eval`) are those of predict's forecasts
// against the file's actual values, and its last-value baseline that of repeating each window's
// last voltage, computed here from the CSVs directly.
TEST(Forecast, EvalMetricsAndLastValueBaselineAreThoseOfTheFile) {
  TempDir dir;
  const std::string run = dir / "run", full = dir / "full.csv";
  ASSERT_EQ(run_seqtrain("train " + example_config() + kSmall + " --set train.epochs=1 --quiet --out " + run).rc, 0);
  ASSERT_EQ(run_seqtrain("data export " + example_config() + kSmall + " --out " + full).rc, 0);
  const std::vector<std::string> rows = lines_of(slurp(full));
  std::string text = rows[0] + "\n";
  for (size_t i = rows.size() - 300; i < rows.size(); ++i) text += rows[i] + "\n";
  const std::string input = write_file(dir, "tail.csv", text);
  Result e = run_seqtrain("eval " + run + " --input " + input);
  ASSERT_EQ(e.rc, 0) << e.out;
  ASSERT_EQ(run_seqtrain("predict " + run + " --input " + input + " --output " + (dir / "p.csv")).rc, 0);
  const std::vector<std::string> pred = lines_of(slurp(dir / "p.csv"));
  std::vector<double> volt;  // column 0 of the 300 rows
  for (size_t i = 1; i < 301; ++i) volt.push_back(numbers(lines_of(text)[i])[0]);
  const int64_t L = 24, H = 4, windows = 300 - L - H + 1;
  ASSERT_EQ(static_cast<int64_t>(pred.size()) - 1, windows);
  double abs = 0, sq = 0, ape = 0, sape = 0, last_abs = 0;
  for (int64_t k = 0; k < windows; ++k) {
    const std::vector<double> f = numbers(pred[k + 1]);
    for (int64_t h = 0; h < H; ++h) {
      const double actual = volt[k + L + h], err = f[h] - actual;
      abs += std::abs(err), sq += err * err, ape += std::abs(err / actual);
      sape += 2 * std::abs(err) / (std::abs(actual) + std::abs(f[h]));
      last_abs += std::abs(volt[k + L - 1] - actual);
    }
  }
  const double n = static_cast<double>(windows * H);
  double naive = 0;
  for (size_t t = 1; t < volt.size(); ++t) naive += std::abs(volt[t] - volt[t - 1]);
  naive /= static_cast<double>(volt.size() - 1);
  auto near = [](double got, double want) { EXPECT_NEAR(got, want, 2e-5 * std::abs(want) + 1e-6); };
  near(value_after(e.out, "mae"), abs / n);
  near(value_after(e.out, "rmse"), std::sqrt(sq / n));
  near(value_after(e.out, "mape"), 100 * ape / n);
  near(value_after(e.out, "smape"), 100 * sape / n);
  near(value_after(e.out, "mase"), abs / n / naive);
  near(value_after(e.out, "baseline_last_value_mae"), last_abs / n);
  near(value_after(e.out, "baseline_last_value_mase"), last_abs / n / naive);
}

}  // namespace
}  // namespace seqtrain::testing
