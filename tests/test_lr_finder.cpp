// `seqtrain find-lr` (train/lr_finder.h, cli/find_lr.h; issue 37, part 5), through the binary:
// it changes no run directory, suggests a rate inside its range and writes its CSV and SVG whole,
// and bad options are refused naming the option with nothing written. The curve's smoothing, early
// stop and suggestion rules directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "test_trainer_util.h"
#include "train/lr_finder.h"

namespace seqtrain::testing {
namespace {

using namespace cli;
Result run(const std::string& args) { return run_seqtrain(args); }

const std::string kExample = example_config();
const std::string kOneEpoch = kSmall + " --set train.epochs=1";

// Every file under `dir` (names and bytes), for "nothing here changed".
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? slurp(e.path().string()) : "<dir>";
  return out;
}

TEST(FinderLr, ChangesNoRunDirectoryAndWritesItsFilesWhole) {
  TempDir dir;
  const std::string out = dir / "run";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --quiet --out " + out).rc, 0);
  const auto before = snapshot(out);
  const std::string lr_dir = dir / "lr";
  // The run's own config: what a user reaches for after a run that learnt too slowly.
  Result r = run("find-lr " + out + "/config.yaml --steps 40 --start 1e-5 --end 1 --out " + lr_dir);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(snapshot(out), before);
  std::set<std::string> top;
  for (const auto& e : fs::directory_iterator(dir.path)) top.insert(e.path().filename().string());
  EXPECT_EQ(top, (std::set<std::string>{"run", "lr"}));
  std::set<std::string> mine;
  for (const auto& e : fs::directory_iterator(lr_dir)) mine.insert(e.path().filename().string());
  EXPECT_EQ(mine, (std::set<std::string>{"lr_find.csv", "lr_find.svg"}));

  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(suggested lr: (\S+) \(([^)]*)\))"))) << r.out;
  const double suggested = std::stod(m[1]);
  EXPECT_GE(suggested, 1e-5);
  EXPECT_LE(suggested, 1.0);
  EXPECT_TRUE(m[2] == "steepest descent of the smoothed loss" || m[2] == "a tenth of the lr at the minimum") << m[2];
  // CSV: the header and one row per printed point, four numbers each, lr rising from --start.
  const std::string csv = slurp(lr_dir + "/lr_find.csv");
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "step,lr,loss,smoothed_loss");
  int64_t rows = 0;
  double last_lr = 0;
  while (std::getline(lines, line)) {
    double step = 0, lr = 0, loss = 0, smooth = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%lf,%lf", &step, &lr, &loss, &smooth), 4) << line;
    EXPECT_EQ(step, double(rows));
    EXPECT_GT(lr, last_lr);
    last_lr = lr;
    ++rows;
  }
  EXPECT_EQ(csv.back(), '\n');
  EXPECT_NEAR(std::stod(csv.substr(csv.find('\n') + 3)), 1e-5, 1e-10);  // row 0's lr is --start
  EXPECT_GE(rows, 2);
  EXPECT_LE(rows, 40);
  // SVG: one whole document with the curves and the suggestion.
  const std::string svg = slurp(lr_dir + "/lr_find.svg");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_CONTAINS(svg, "id=\"suggestion\"");
  EXPECT_CONTAINS(svg, "<polyline");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);  // nothing to fetch
}

TEST(FinderLr, BadOptionsAreRefusedNamingTheOptionAndNothingIsWritten) {
  TempDir dir;
  const std::string out = dir / "lr";
  const std::string cfg = "find-lr " + kExample + kSmall + " --out " + out;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --start 1 --end 0.1", "--start 1 is not below --end 0.1"},
      {" --start 0.5 --end 0.5", "--start 0.5 is not below --end 0.5"},
      {" --start 0", "--start 0: the range's first learning rate must be a number > 0"},
      {" --end -1", "--end -1: the range's last learning rate must be a number > 0"},
      {" --steps 1", "--steps 1: the test needs at least 2 steps"},
      {" --set train.batch_size=auto --set runtime.memory_limit=64KiB", "Set runtime.memory_limit to at least"},
  };
  for (const auto& [args, message] : cases) {
    Result r = run(cfg + args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out;
    EXPECT_CONTAINS(r.out, message);
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  // A run directory as --out: refused, the run untouched.
  const std::string run_dir = dir / "run";
  ASSERT_EQ(run("train " + kExample + kOneEpoch + " --quiet --out " + run_dir).rc, 0);
  const auto before = snapshot(run_dir);
  Result r = run("find-lr " + kExample + kSmall + " --steps 5 --out " + run_dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "holds a training run");
  EXPECT_EQ(snapshot(run_dir), before);
}

TEST(FinderLr, TheCurveSmoothsStopsOnDivergenceAndSuggestsInsideTheRange) {
  // A loss that falls fastest around lr 1e-3, bottoms out near 1e-1, then explodes.
  const int64_t steps = 100;
  LrCurve curve(steps);
  std::string why;
  int64_t ran = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const double lr = 1e-7 * std::pow(1e8, double(i) / double(steps - 1));
    const double x = std::log10(lr);
    const double loss = x < -1 ? 2.0 - 1.5 / (1 + std::exp(-2.0 * (x + 3))) : 0.5 + std::pow(10.0, 2 * (x + 1)) - 1;
    ++ran;
    if (!curve.add(i, lr, loss, &why)) break;
  }
  EXPECT_LT(ran, steps);
  EXPECT_CONTAINS(why, "diverged at step");
  LrFinderResult r;
  r.points = curve.points();
  suggest_lr(r, 1e-7, 10);
  EXPECT_EQ(r.rule, "steepest descent of the smoothed loss");
  EXPECT_GT(r.suggestion, 1e-4);  // around the fall (the smoothing lags it a little)
  EXPECT_LT(r.suggestion, 1e-1);
  EXPECT_LT(r.suggestion, r.points[r.min_index].lr);
  // A curve that only rises: no descent to read, a tenth of the minimum's lr, kept in the range.
  LrCurve rising(10);
  for (int64_t i = 0; i < 10; ++i) rising.add(i, 1e-3 * std::pow(2.0, double(i)), 1.0 + 0.01 * double(i), &why);
  LrFinderResult up;
  up.points = rising.points();
  suggest_lr(up, 1e-3, 1);
  EXPECT_EQ(up.rule, "a tenth of the lr at the minimum");
  EXPECT_DOUBLE_EQ(up.suggestion, 1e-3);  // 1e-4 clamped to --start
  // A loss that is not finite ends the test without a point.
  LrCurve nan_curve(100);
  EXPECT_TRUE(nan_curve.add(0, 1e-3, 1.0, &why));
  EXPECT_FALSE(nan_curve.add(1, 1e-2, std::nan(""), &why));
  EXPECT_CONTAINS(why, "loss not finite at step 1");
  EXPECT_EQ(nan_curve.points().size(), 1u);
  EXPECT_CONTAINS(error_of([] { check_lr_finder_options({.start = 1, .end = 1, .steps = 10}); }), "--start 1 is not below --end 1");
}

}  // namespace
}  // namespace seqtrain::testing
