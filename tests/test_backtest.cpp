// `seqtrain backtest` and the fleet through the CLI (issue 38, items 1-4): a synthetic fleet
// trains; predict writes each window's series; backtest without refit gives at every origin
// exactly predict's forecast of that window, and metrics a Python recomputation from
// predictions.csv agrees with; with --refit fold k trains on the rows before its origin only
// (its statistics are those rows', and changing any later row changes nothing of it); bad
// origins, --series and inputs are clear errors that write nothing; the plot holds one path
// per series, target, fold and band.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::istringstream l(line);
    for (std::string c; std::getline(l, c, ',');) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    out.push_back(cells);
  }
  return out;
}

size_t column(const std::vector<std::string>& header, const std::string& name) {
  const auto it = std::find(header.begin(), header.end(), name);
  EXPECT_NE(it, header.end()) << name;
  return static_cast<size_t>(it - header.begin());
}

// A fleet of 4 synthetic cells, quantile forecasts, per-series statistics: small and quick.
const std::string kFleet = R"(seed: 0
data:
  source: synthetic
  synthetic:
    rows: 400
    cells: 4
  features: [voltage, current, temperature, soc]
  static_features: [capacity, resistance, ambient]
  future_features: [current]
  targets: [voltage]
  lookback: 24
  horizon: 4
  normalize_scope: series
model:
  type: lstm
  hidden: 16
train:
  epochs: 1
  batch_size: 64
  loss: quantile
runtime:
  threads: 1
  deterministic: true
)";

struct FleetRun {
  TempDir dir;
  std::string run = dir / "run", data = dir / "fleet.csv";
  FleetRun() {
    const std::string config = write_file(dir, "fleet.yaml", kFleet);
    Result t = run_seqtrain("train " + config + " --quiet --out " + run);
    EXPECT_EQ(t.rc, 0) << t.out;
    Result e = run_seqtrain("data export " + config + " --out " + data);
    EXPECT_EQ(e.rc, 0) << e.out;
  }
};

TEST(Backtest, FoldsArePredictsForecastsAtTheirOriginsAndPythonAgreesOnTheMetrics) {
  FleetRun f;
  // predict: a series column, then every window's levels.
  Result p = run_seqtrain("predict " + f.run + " --input " + f.data + " --output " + (f.dir / "p.csv"));
  ASSERT_EQ(p.rc, 0) << p.out;
  const auto pred = csv_rows(f.dir / "p.csv");
  ASSERT_EQ(pred[0][0], "series");
  EXPECT_EQ(pred[0][1], "voltage_t+1_q0.1");
  EXPECT_EQ(pred.size(), 1u + 4 * (400 - 24 - 4 + 1));
  // eval of the fleet: each series' line.
  Result ev = run_seqtrain("eval " + f.run);
  ASSERT_EQ(ev.rc, 0) << ev.out;
  EXPECT_CONTAINS(ev.out, "series: 4");
  EXPECT_CONTAINS(ev.out, "series cell_003: mae ");

  const std::string out = f.dir / "bt";
  Result b = run_seqtrain("backtest " + f.run + " --input " + f.data + " --folds 3 --step 10 --out " + out);
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_CONTAINS(b.out, "overall (3 folds x 4 series)");
  const auto bt = csv_rows(out + "/predictions.csv");
  const auto& h = bt[0];
  const size_t fold = column(h, "fold"), series = column(h, "series"), origin = column(h, "origin"),
               step = column(h, "step"), q1 = column(h, "forecast_q0.1");
  ASSERT_EQ(bt.size(), 1u + 3 * 4 * 4);  // folds x series x steps (one target)
  // Fold k's origin in each series: 400 - 4 - (2 - k) * 10; its window starts 24 rows before,
  // which is predict's row (origin - 24) among that series' rows.
  std::map<std::string, size_t> first_row;  // series -> its first row in p.csv
  for (size_t r = pred.size() - 1; r >= 1; --r) first_row[pred[r][0]] = r;
  for (size_t r = 1; r < bt.size(); ++r) {
    const int64_t k = std::stoll(bt[r][fold]), o = std::stoll(bt[r][origin]), s = std::stoll(bt[r][step]);
    ASSERT_EQ(o, 400 - 4 - (2 - k) * 10);
    const auto& want = pred[first_row[bt[r][series]] + static_cast<size_t>(o - 24)];
    for (int64_t q = 0; q < 3; ++q) {
      const double got = std::stod(bt[r][q1 + q]), expect = std::stod(want[1 + (s - 1) * 3 + q]);
      EXPECT_NEAR(got, expect, 2e-6 * std::abs(expect)) << "fold " << k << " " << bt[r][series] << " step " << s;
    }
  }
  EXPECT_EQ(run_python("backtest_check.py", out), 0) << "backtest.json / backtest.csv disagree with predictions.csv";

  // --origins as row numbers: the same forecasts at the same origins.
  Result o = run_seqtrain("backtest " + f.run + " --input " + f.data + " --origins 376,386 --out " + (f.dir / "o"));
  ASSERT_EQ(o.rc, 0) << o.out;
  const auto ob = csv_rows(f.dir / "o/predictions.csv");
  ASSERT_EQ(ob.size(), 1u + 2 * 4 * 4);
  EXPECT_EQ(ob[1][q1], bt[1][q1]) << "origin 376 is fold 0 of --folds 3 --step 10";
  EXPECT_EQ(ob[1 + 4 * 4][q1], bt[1 + 4 * 4][q1]) << "origin 386 is its fold 1";
  EXPECT_EQ(run_python("backtest_check.py", f.dir / "o"), 0);

  // The plot: per series and target a history, an actual, and per fold a forecast and a band.
  Result pl = run_seqtrain("backtest " + f.run + " --input " + f.data + " --folds 3 --step 10 --out " + out +
                           " --plot " + (f.dir / "bt.svg") + " --series cell_002");
  ASSERT_EQ(pl.rc, 0) << pl.out;
  const std::string svg = slurp(f.dir / "bt.svg");
  auto count = [](const std::string& text, const std::string& re) {
    const std::regex r(re);
    return std::distance(std::sregex_iterator(text.begin(), text.end(), r), std::sregex_iterator());
  };
  EXPECT_EQ(count(svg, "<path data-kind=\"history\" data-series=\"cell_002\""), 1);
  EXPECT_EQ(count(svg, "<path data-kind=\"actual\" data-series=\"cell_002\""), 1);
  EXPECT_EQ(count(svg, "<path data-kind=\"forecast\" data-series=\"cell_002\""), 3);
  EXPECT_EQ(count(svg, "<path data-kind=\"band\"[^>]*data-quantiles=\"0.1-0.9\""), 3);
  EXPECT_CONTAINS(svg, "voltage [V]");
  // predict --plot: the first four series, one forecast each.
  Result pp = run_seqtrain("predict " + f.run + " --input " + f.data + " --output " + (f.dir / "p2.csv") + " --plot " +
                           (f.dir / "p.svg"));
  ASSERT_EQ(pp.rc, 0) << pp.out;
  const std::string psvg = slurp(f.dir / "p.svg");
  EXPECT_EQ(count(psvg, "<path data-kind=\"forecast\""), 4);
}

TEST(Backtest, BadOriginsSeriesAndInputsAreClearErrorsThatWriteNothing) {
  FleetRun f;
  const std::string out = f.dir / "bt", base = "backtest " + f.run + " --input " + f.data + " --out " + out;
  Result r = run_seqtrain(base + " --origins 10");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "--origins: fold 0's origin is row 10 of series 'cell_000', before its first full lookback");
  r = run_seqtrain(base + " --origins 398");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "run past the data (the last origin with actual values is row 396)");
  r = run_seqtrain(base + " --folds 40 --step 10");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "give fewer folds or a smaller --step");
  r = run_seqtrain(base + " --origins 300,200");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "increasing order");
  r = run_seqtrain(base + " --plot " + (f.dir / "x.svg") + " --series cell_9");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "--series 'cell_9' names no series of the data");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_FALSE(fs::exists(f.dir / "x.svg"));
  r = run_seqtrain("predict " + f.run + " --input " + f.data + " --output " + (f.dir / "p.csv") + " --plot " +
                   (f.dir / "p.svg") + " --series nine");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "--series 'nine' names no series");
  EXPECT_FALSE(fs::exists(f.dir / "p.csv"));
  // An input without the series column: one series, named by its stem, which per-series
  // statistics do not know.
  std::string text = slurp(f.data);
  std::string one = "voltage,current,temperature,soc,capacity,resistance,ambient\n";
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line))
    if (line.rfind("cell_001,", 0) == 0) one += line.substr(9) + "\n";
  write_file(f.dir, "cell_001.csv", one);
  write_file(f.dir, "mystery.csv", one);
  r = run_seqtrain("backtest " + f.run + " --input " + (f.dir / "cell_001.csv") + " --folds 2 --out " + out);
  EXPECT_EQ(r.rc, 0) << r.out << " (one file of the fleet: its stem names the series)";
  r = run_seqtrain("backtest " + f.run + " --input " + (f.dir / "mystery.csv") + " --out " + (f.dir / "m"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "series 'mystery' has no normalization statistics of its own");
  EXPECT_FALSE(fs::exists(f.dir / "m"));
}

// --refit on one series: fold k's run is the run's config with data.end at its origin; its
// statistics are those of the training share of the rows before it, and rewriting every row
// after the origin leaves its weights bit for bit the same.
TEST(Backtest, RefitTrainsEachFoldOnTheRowsBeforeItsOrigin) {
  TempDir dir;
  const std::string run = dir / "run", data = dir / "data.csv";
  const std::string small =
      kSmall + " --set data.synthetic.rows=1200 --set train.epochs=1 --set train.schedule.warmup_steps=2";
  ASSERT_EQ(run_seqtrain("train " + example_config() + small + " --quiet --out " + run).rc, 0);
  ASSERT_EQ(run_seqtrain("data export " + example_config() + small + " --out " + data).rc, 0);
  Result r = run_seqtrain("backtest " + run + " --input " + data + " --origins 900,1180 --refit --out " + (dir / "a"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "fold 0: trained on the rows before its origin (data.end 900)");
  const std::string fold0 = dir / "a/refit/fold_0";
  EXPECT_CONTAINS(slurp(fold0 + "/config.yaml"), "end: \"900\"");
  // Its statistics: the voltage column's mean over the training share (0.8) of rows [0, 900).
  const auto rows = csv_rows(data);
  double sum = 0;
  for (size_t i = 1; i <= 720; ++i) sum += std::stod(rows[i][0]);
  const nlohmann::json st = nlohmann::json::parse(slurp(fold0 + "/checkpoints/best/state.json"));
  EXPECT_NEAR(st["normalizer"]["shift"][0].get<double>(), sum / 720, 1e-6);
  // Rows from 900 on rewritten: fold 0's model is unchanged, fold 1's (whose training share, 0.8 of
  // 1180 rows, holds rows 900-943) is not.
  std::istringstream lines(slurp(data));
  std::string changed, line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    if (i > 900) {  // data row i is row i - 1 of the series: rows 900 and after
      std::string scaled;
      for (size_t c = 0; c < rows[i].size(); ++c) scaled += fmt::format("{}{:.9g}", c ? "," : "", std::stod(rows[i][c]) * 1.01 + 0.05);
      line = scaled;
    }
    changed += line + "\n";
  }
  write_file(dir, "changed.csv", changed);
  r = run_seqtrain("backtest " + run + " --input " + (dir / "changed.csv") + " --origins 900,1180 --refit --out " +
                   (dir / "b"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(slurp(dir / "a/refit/fold_0/checkpoints/best/model.safetensors") ==
              slurp(dir / "b/refit/fold_0/checkpoints/best/model.safetensors"));
  EXPECT_TRUE(slurp(dir / "a/refit/fold_1/checkpoints/best/model.safetensors") !=
              slurp(dir / "b/refit/fold_1/checkpoints/best/model.safetensors"));
  EXPECT_EQ(run_python("backtest_check.py", dir / "a"), 0);
}

}  // namespace
}  // namespace seqtrain::testing
