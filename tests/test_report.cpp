// `seqtrain report`'s pieces (obs/run_history.h, obs/svg_plot.h, obs/report.h): a config
// flattened to dotted keys and the keys that differ, curves read from metrics.jsonl records
// (nulls and other splits left out), run directories that are not runs, torn and damaged metrics
// lines, the SVG's data attributes, and --out paths that cannot be written, through the library
// and through the binary. What a browser draws of a real report is tests/py/report_check.py's.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "obs/report.h"
#include "obs/run_history.h"
#include "obs/svg_plot.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {

// A run directory written by hand: what report reads of a run, without training one.
std::string fake_run(const TempDir& dir, const std::string& name, const std::string& config, const std::string& metrics,
                     const std::string& summary = "") {
  const std::string d = dir / name;
  fs::create_directories(d);
  std::ofstream(d + "/config.yaml") << config;
  std::ofstream(d + "/metrics.jsonl") << metrics;
  if (!summary.empty()) std::ofstream(d + "/summary.json") << summary;
  return d;
}

const char* kMetrics =
    R"({"split":"train","step":2,"epoch":0,"loss":1.5,"lr":0.001,"samples_per_s":100.0,"time_s":1})"
    "\n"
    R"({"split":"train","step":4,"epoch":0,"loss":null,"lr":0.002,"samples_per_s":120.0,"time_s":2})"
    "\n"
    R"({"split":"data","step":4,"epoch":0,"loss":null,"lr":null,"data_wait_share":0.01,"epoch_train_s":2.0})"
    "\n"
    R"({"split":"val","step":4,"epoch":0,"loss":1.2,"lr":0.002,"mae":0.3,"baseline_last_value":0.1})"
    "\n"
    R"({"split":"train","step":6,"epoch":1,"loss":0.9,"lr":0.002,"samples_per_s":130.0,"time_s":3})"
    "\n";

TEST(ReportConfig, FlattensNestedMapsToDottedKeysAndListsToTheirFlowForm) {
  const auto c = flatten_yaml("seed: 0\ndata:\n  split: [0.8, 0.1, 0.1]\n  synthetic:\n    rows: 3000\n  features: []\n"
                              "train:\n  param_groups: [{prefix: rnn., lr_scale: 0.1}]\n  optimizer: {}\n",
                              "config.yaml");
  EXPECT_EQ(c.at("seed"), "0");
  EXPECT_EQ(c.at("data.split"), "[0.8, 0.1, 0.1]");
  EXPECT_EQ(c.at("data.synthetic.rows"), "3000");
  EXPECT_EQ(c.at("data.features"), "[]");
  EXPECT_EQ(c.at("train.param_groups"), "[{prefix: rnn., lr_scale: 0.1}]");
  EXPECT_EQ(c.at("train.optimizer"), "{}");
  EXPECT_EQ(c.size(), 6u);
  EXPECT_CONTAINS(error_of([] { flatten_yaml("data: [1, 2\n", "runs/a/config.yaml"); }), "runs/a/config.yaml:");
  EXPECT_CONTAINS(error_of([] { flatten_yaml("- 1\n- 2\n", "runs/a/config.yaml"); }), "not a list");
}

TEST(ReportConfig, DifferencesAreTheKeysWhoseValuesDifferOrThatARunLacks) {
  const std::map<std::string, std::string> a = {{"model.hidden", "64"}, {"seed", "0"}, {"train.lr", "0.001"}};
  const std::map<std::string, std::string> b = {{"model.hidden", "32"}, {"seed", "0"}, {"train.lr", "0.001"},
                                                {"model.dropout", "0.1"}};
  const auto d = config_differences({a, b});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].key, "model.dropout");  // sorted by key
  EXPECT_FALSE(d[0].values[0].has_value());
  EXPECT_EQ(*d[0].values[1], "0.1");
  EXPECT_EQ(d[1].key, "model.hidden");
  EXPECT_EQ(*d[1].values[0], "64");
  EXPECT_EQ(*d[1].values[1], "32");
  EXPECT_TRUE(config_differences({a, a, a}).empty());
  EXPECT_TRUE(config_differences({a}).empty());  // one run: nothing to compare
}

TEST(ReportCurves, AFieldOfOneSplitAgainstStepOrEpochWithNullsLeftOut) {
  TempDir dir;
  const RunHistory r = read_run_history(fake_run(dir, "a", "seed: 0\n", kMetrics));
  ASSERT_EQ(r.records.size(), 5u);
  const auto loss = curve(r, "train", "loss");
  ASSERT_EQ(loss.size(), 2u);  // the null loss of step 4 is no point
  EXPECT_EQ(loss[0].x, 2);
  EXPECT_EQ(loss[0].y, 1.5);
  EXPECT_EQ(loss[1].x, 6);
  EXPECT_EQ(curve(r, "train", "lr").size(), 3u);
  const auto val = curve(r, "val", "loss");
  ASSERT_EQ(val.size(), 1u);
  EXPECT_EQ(val[0].y, 1.2);
  const auto wait = curve(r, "data", "data_wait_share", "epoch");
  ASSERT_EQ(wait.size(), 1u);
  EXPECT_EQ(wait[0].x, 0);
  EXPECT_EQ(wait[0].y, 0.01);
  EXPECT_TRUE(curve(r, "test", "loss").empty());
  EXPECT_TRUE(curve(r, "train", "no_such_field").empty());
}

TEST(ReportRuns, APathThatIsNoRunDirectoryIsRefusedByNameWithTheFix) {
  TempDir dir;
  std::string e = error_of([&] { read_run_history(dir / "missing"); });
  EXPECT_CONTAINS(e, dir / "missing");
  EXPECT_CONTAINS(e, "does not exist");
  EXPECT_CONTAINS(e, "--out directory of a `seqtrain train` run");
  fs::create_directories(dir / "empty");
  e = error_of([&] { read_run_history(dir / "empty"); });
  EXPECT_CONTAINS(e, "is not a run directory: it has no metrics.jsonl");
  std::ofstream(dir / "empty/metrics.jsonl") << kMetrics;
  EXPECT_CONTAINS(error_of([&] { read_run_history(dir / "empty"); }), "it has no config.yaml");
  const std::string file = write_file(dir, "file.txt", "x");
  EXPECT_CONTAINS(error_of([&] { read_run_history(file); }), "is a file, not a run directory");
}

TEST(ReportRuns, ATornLastLineIsLeftOutAndADamagedLineElsewhereNamesFileAndLine) {
  TempDir dir;
  const std::string torn = fake_run(dir, "torn", "seed: 0\n", std::string(kMetrics) + R"({"split":"train","st)");
  const RunHistory r = read_run_history(torn);
  EXPECT_EQ(r.records.size(), 5u);
  EXPECT_TRUE(r.summary.is_null());  // no summary.json: a run still training
  const std::string bad = fake_run(dir, "bad", "seed: 0\n", std::string("{\"split\":\"train\"}\nnot json\n") + kMetrics);
  const std::string e = error_of([&] { read_run_history(bad); });
  EXPECT_CONTAINS(e, bad + "/metrics.jsonl:2:");
  EXPECT_CONTAINS(e, "delete that line");
  const std::string summary = fake_run(dir, "summary", "seed: 0\n", kMetrics, "[1, 2]");
  EXPECT_CONTAINS(error_of([&] { read_run_history(summary); }), summary + "/summary.json");
}

TEST(ReportRuns, RunsAreNamedByTheirDirectoryAndToldApartWhenNamesClash) {
  std::vector<RunHistory> runs(4);
  runs[0].dir = "runs/a";
  runs[1].dir = "other/a/";
  runs[2].dir = "runs/b";
  runs[3].dir = "runs/b";
  name_runs(runs);
  EXPECT_EQ(runs[0].name, "runs/a");
  EXPECT_EQ(runs[1].name, "other/a/");
  EXPECT_EQ(runs[2].name, "runs/b");
  EXPECT_EQ(runs[3].name, "runs/b #2");
  std::vector<RunHistory> one(1);
  one[0].dir = "runs/my_run/";
  name_runs(one);
  EXPECT_EQ(one[0].name, "my_run");
}

TEST(ReportSvg, EachSeriesIsAPathThatSaysItsRunSeriesAndPointsDrawn) {
  PlotSeries a{"run <1>", "train_loss", "a", "#1f77b4", false, false, {{0, 1}, {1, 0.5}, {2, NAN}, {3, 0.25}}};
  PlotSeries b{"b", "val_loss", "b", "#ff7f0e", true, true, {{1, 0.7}}};
  const std::string svg = line_chart({"loss", "Loss", "step", "loss", true}, {a, b});
  EXPECT_CONTAINS(svg, "<svg class=\"chart\" id=\"loss\" data-chart=\"loss\"");
  EXPECT_CONTAINS(svg, "data-run=\"run &lt;1&gt;\" data-series=\"train_loss\" data-points=\"3\"");  // the NaN left out
  EXPECT_CONTAINS(svg, "data-run=\"b\" data-series=\"val_loss\" data-points=\"1\"");
  EXPECT_CONTAINS(svg, "stroke-dasharray");
  EXPECT_CONTAINS(svg, "<circle");
  EXPECT_CONTAINS(svg, "(log)");
  // A non-positive value makes a log chart linear rather than dropping the point.
  PlotSeries zero{"z", "lr", "z", "#000", false, false, {{0, 0}, {1, 0.001}}};
  const std::string lin = line_chart({"lr", "lr", "step", "lr", true}, {zero});
  EXPECT_EQ(lin.find("(log)"), std::string::npos);
  EXPECT_CONTAINS(lin, "data-points=\"2\"");
  const std::string empty = line_chart({"none", "None", "step", "y"}, {});
  EXPECT_CONTAINS(empty, "no data in these runs");
  EXPECT_EQ(empty.find("<path"), std::string::npos);
}

TEST(ReportSvg, TicksAreRoundNumbersAndLabelsPlainDigits) {
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 2, 6, 1.0), (std::vector<double>{0, 1, 2}));  // epochs: no half epoch
  EXPECT_EQ(nice_ticks(0.13, 0.31, 4), (std::vector<double>{0.15, 0.2, 0.25, 0.3}));
  EXPECT_EQ(short_number(12000), "12000");
  EXPECT_EQ(short_number(0.0015), "0.0015");
  EXPECT_EQ(short_number(0.25), "0.25");
  EXPECT_EQ(short_number(2e-5), "2e-05");
  EXPECT_EQ(escape_html("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(ReportPage, OnePageWithTheChartsTheFinalMetricsAndTheDifferingKeys) {
  TempDir dir;
  const std::string a = fake_run(dir, "a", "seed: 0\nmodel:\n  hidden: 64\n", kMetrics,
                                 R"({"stopped_by": "epochs", "test_loss": 0.5, "test_accuracy": null})");
  const std::string b = fake_run(dir, "b", "seed: 0\nmodel:\n  hidden: 16\n", kMetrics);
  const std::string out = dir / "report.html";
  write_report({a, b}, out);
  const std::string page = cli::slurp(out);
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  for (const char* id : {"id=\"loss\"", "id=\"val_mae\"", "id=\"lr\"", "id=\"throughput\"", "id=\"data_wait\"",
                         "id=\"final-metrics\"", "id=\"config-diff\"", "id=\"legend\""})
    EXPECT_CONTAINS(page, id);
  EXPECT_EQ(page.find("val_baseline_last_value"), std::string::npos);  // a baseline is no metric of the model
  EXPECT_CONTAINS(page, "<tr data-key=\"model.hidden\"><th>model.hidden</th><td>64</td><td>16</td></tr>");
  EXPECT_EQ(page.find("data-key=\"seed\""), std::string::npos);  // equal keys are not shown
  EXPECT_CONTAINS(page, "<tr data-key=\"test_loss\"><th>test_loss</th><td>0.5</td><td>&ndash;</td></tr>");
  // Self-contained: no script, stylesheet, image or font is fetched.
  for (const char* outside : {"<script", "<link", "src=", "url(", "http://", "https://"}) {
    std::string p = page;
    for (size_t at; (at = p.find("http://www.w3.org/2000/svg")) != std::string::npos;) p.erase(at, 26);  // a namespace name
    EXPECT_EQ(p.find(outside), std::string::npos) << outside;
  }
}

TEST(ReportPage, AnOutThatCannotBeWrittenIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string a = fake_run(dir, "a", "seed: 0\n", kMetrics);
  std::string e = error_of([&] { write_report({a}, dir / "no/such/dir/report.html"); });
  EXPECT_CONTAINS(e, "the directory '" + (dir / "no/such/dir") + "' does not exist");
  EXPECT_CONTAINS(e, "mkdir -p");
  e = error_of([&] { write_report({a}, dir.path.string()); });
  EXPECT_CONTAINS(e, "is a directory; give the file to write");
  e = error_of([&] { write_report({a, dir / "nope"}, dir / "report.html"); });
  EXPECT_CONTAINS(e, dir / "nope");
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

TEST(ReportCli, ABadRunExitsTwoNamingThePathAndWritesNothing) {
  TempDir dir;
  const std::string a = fake_run(dir, "a", "seed: 0\n", kMetrics);
  const std::string out = dir / "report.html";
  cli::Result r = cli::run_seqtrain("report " + a + " " + source_dir() + "/src --out " + out);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "'" + source_dir() + "/src' is not a run directory: it has no metrics.jsonl");
  EXPECT_FALSE(fs::exists(out));
  r = cli::run_seqtrain("report " + a + " --out " + (dir / "missing/report.html"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_CONTAINS(r.out, "does not exist; create it first");
  r = cli::run_seqtrain("report " + a + " --out " + out);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "report: " + out + " (1 run)");
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace
}  // namespace seqtrain::testing
