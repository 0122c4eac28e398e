// Forecast quality (issue: forecasts that beat the seasonal naive): the scorer of val/test
// records and eval against numpy computed straight from the CSV (metrics, last-value and
// seasonal-naive baselines, seasonal MASE, per target); model.residual_to reproducing its
// baseline bit for bit with the output layer zeroed; a short residual run beating the seasonal
// naive on a double-seasonal series; train.monitor choosing the best checkpoint (and a resume
// keeping it); the records of csv and npy runs; the config errors of the new keys; the CO2
// fetcher offline; quantile forecasts (the pinball loss and the monotone output against
// PyTorch and finite differences, interval coverage, one predict column per level).
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "config/config.h"
#include "core/arena.h"
#include "core/seasonal.h"
#include "data/dataset.h"
#include "model_pass.h"
#include "models/registry.h"
#include "nn/loss.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/forecast_scorer.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;
using cli::slurp;

// a: a cycle of 6 rows plus noise; b: noise around 2 with some zeros (MAPE skips them); c: noise.
std::string seasonal_csv(const TempDir& dir, int rows) {
  Rng rng(5);
  std::string csv = "a,b,c\n";
  for (int r = 0; r < rows; ++r) {
    const double b = r % 17 == 3 ? 0.0 : 2 + 0.5 * rng.normal();
    csv += fmt::format("{:.6f},{:.6f},{:.6f}\n", 3 + std::sin(2 * M_PI * r / 6) + 0.3 * rng.normal(), b, rng.normal());
  }
  return write_file(dir, "series.csv", csv);
}

void expect_metrics_near(const nlohmann::json& got, const nlohmann::json& want, const std::string& where) {
  for (const char* k : {"mae", "rmse", "mape", "smape", "mase"}) {
    ASSERT_TRUE(got.contains(k) && got[k].is_number()) << where << "." << k << " missing in " << got.dump();
    const double w = want[k];
    EXPECT_NEAR(got[k].get<double>(), w, 1e-6 * std::abs(w)) << where << "." << k;
  }
}

TEST(ForecastScorer, MetricsAndBaselinesEqualNumpyFromTheCsv) {
  TempDir dir;
  const std::string csv = seasonal_csv(dir, 160);
  // Targets in another order than the features, so each target's place in x is looked up.
  const Config c = load_config_text("data:\n  source: csv\n  path: " + csv +
                                        "\n  features: [a, b, c]\n  targets: [b, a]\n  lookback: 8\n  horizon: 3\n"
                                        "  split: [0.5, 0.2, 0.3]\n  seasons: [6]\n",
                                    "scorer.yaml", dir.path.string());
  const Dataset ds = load_dataset(c);
  ASSERT_EQ(ds.n_features(), 5) << "a, b, c and the season's sine and cosine";
  const ForecastScoring scoring = ForecastScoring::of(ds, c.data.seasons);
  EXPECT_EQ(scoring.target_in_x, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(scoring.season, 6);
  EXPECT_EQ(scoring.mase_lag, 6);
  const WindowDataset& split = ds.test;
  const int64_t N = split.size(), T = 2, H = 3;
  std::vector<float> x(N * split.x_size()), y(N * split.y_size()), p(N * split.y_size()), p_units(p.size());
  split.fill_batch(0, N, x.data(), y.data());
  for (size_t k = 0; k < p.size(); ++k) {
    p[k] = 0.9f * y[k] + 0.2f * static_cast<float>(std::sin(0.7 * k));
    const int64_t t = static_cast<int64_t>(k) % T;
    p_units[k] = static_cast<float>(p[k] * scoring.unit_scale[t] + scoring.unit_shift[t]);
  }
  ForecastScorer scorer(scoring);
  scorer.add(N / 2, x.data(), y.data(), p.data());  // in two batches, as evaluations feed it
  const int64_t rest = N - N / 2;
  scorer.add(rest, x.data() + N / 2 * split.x_size(), y.data() + N / 2 * split.y_size(), p.data() + N / 2 * split.y_size());
  const nlohmann::json got = scorer.report();

  write_npy(dir / "pred.npy", p_units, {N, H * T});
  const nlohmann::json setup = {{"targets", {"b", "a"}}, {"lookback", 8}, {"horizon", 3}, {"season", 6},
                                {"rows", {split.rows().begin, split.rows().end}},
                                {"train_rows", {ds.splits[0].begin, ds.splits[0].end}}};
  write_file(dir, "setup.json", setup.dump());
  ASSERT_EQ(run_python("forecast_scorer_ref.py", dir.path.string()), 0);
  const nlohmann::json want = nlohmann::json::parse(slurp(dir / "report.json"));
  expect_metrics_near(got, want, "model");
  for (const char* t : {"a", "b"}) expect_metrics_near(got["per_target"][t], want["per_target"][t], t);
  for (const char* b : {"last_value", "seasonal_naive"}) {
    expect_metrics_near(got["baseline"][b], want["baseline"][b], b);
    for (const char* t : {"a", "b"})
      expect_metrics_near(got["baseline"][b]["per_target"][t], want["baseline"][b]["per_target"][t],
                          std::string(b) + "." + t);
  }
  // The seasonal naive is the bar on a seasonal series: far below the last value's error on a.
  EXPECT_LT(got["baseline"]["seasonal_naive"]["per_target"]["a"]["mae"].get<double>(),
            0.6 * got["baseline"]["last_value"]["per_target"]["a"]["mae"].get<double>());
}

TEST(ForecastScorer, NoBaselinesWhenATargetIsNoInputAndNoSeasonalOneWhenTheSeasonIsLongerThanTheWindow) {
  TempDir dir;
  const std::string csv = seasonal_csv(dir, 120);
  const std::string base = "data:\n  source: csv\n  path: " + csv + "\n  lookback: 4\n  horizon: 2\n";
  const Dataset no_input = load_dataset(load_config_text(base + "  features: [b, c]\n  targets: [a]\n", "c.yaml", ""));
  const ForecastScoring s1 = ForecastScoring::of(no_input, {});
  EXPECT_FALSE(s1.baselines());
  std::vector<float> x(no_input.test.size() * no_input.test.x_size()), y(no_input.test.size() * no_input.test.y_size());
  no_input.test.fill_batch(0, no_input.test.size(), x.data(), y.data());
  ForecastScorer scorer(s1);
  scorer.add(no_input.test.size(), x.data(), y.data(), y.data());
  EXPECT_FALSE(scorer.report().contains("baseline"));
  EXPECT_EQ(scorer.report()["mae"].get<double>(), 0.0) << "the forecast is the truth";
  const Dataset long_season =
      load_dataset(load_config_text(base + "  features: [a, b]\n  targets: [a]\n  seasons: [6]\n", "c.yaml", ""));
  const ForecastScoring s2 = ForecastScoring::of(long_season, {6});
  EXPECT_TRUE(s2.baselines());
  EXPECT_EQ(s2.season, 0) << "a 6-row season does not fit a 4-row window";
  EXPECT_EQ(s2.mase_lag, 6) << "MASE still scales by the seasonal naive's in-sample error";
}

// With the output layer zeroed, the forecast is the baseline itself, bit for bit, for the RNN
// and the MLP forecaster, last value and seasonal naive.
TEST(ResidualTo, ZeroedOutputLayerGivesTheBaselineBitForBit) {
  for (const char* type : {"lstm", "gru", "mlp"})
    for (int64_t period : {1, 5}) {
      ModelSpec spec;
      spec.type = type;
      spec.input_size = 3;
      spec.lookback = 7;
      spec.hidden = 8;
      spec.output_size = 4 * 2;  // horizon 4, targets 2
      spec.residual_to = period == 1 ? "last_value" : "seasonal_naive";
      spec.residual_period = period;
      spec.residual_inputs = {2, 0};
      std::unique_ptr<Model> m = build_model(spec);
      Rng init(3);
      m->init(init);
      for (const ParamEntry& e : m->params().entries())
        if (e.name.rfind("head.", 0) == 0)
          std::fill_n(m->params().params() + e.offset, numel_of(e.shape), 0.f);
      Rng rng(9);
      std::vector<float> x = randn(rng, 5 * 7 * 3);
      Arena arena;
      const Tensor out = ModelPass(*m, arena, false).forward(Tensor(x.data(), {5, 7, 3}));
      ASSERT_EQ(out.numel(), 5 * 8);
      for (int64_t b = 0; b < 5; ++b)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t t = 0; t < 2; ++t) {
            const float want = x[(b * 7 + seasonal_source_step(7, period, h)) * 3 + spec.residual_inputs[t]];
            EXPECT_EQ(out.f32()[b * 8 + h * 2 + t], want) << type << " period " << period << " b" << b << " h" << h;
          }
    }
}

// Two cycles (12 and 84 rows) plus noise: repeating the last long cycle (the seasonal naive)
// carries the noise of two points; a short residual run learns to smooth it.
TEST(ResidualTo, AShortSeasonalRunBeatsTheSeasonalNaiveOnADoubleSeasonalSeries) {
  TempDir dir;
  Rng rng(21);
  std::string csv = "load\n";
  for (int r = 0; r < 3000; ++r)
    csv += fmt::format("{:.6f}\n", 10 + 2 * std::sin(2 * M_PI * r / 12) + std::sin(2 * M_PI * r / 84) +
                                       0.004 * r + 0.4 * rng.normal());
  const std::string path = write_file(dir, "load.csv", csv);
  Config c = load_config_text("data:\n  source: csv\n  path: " + path +
                                  "\n  targets: [load]\n  lookback: 96\n  horizon: 12\n  seasons: [12, 84]\n"
                                  "  split: [0.7, 0.15, 0.15]\n  workers: 0\n"
                                  "model:\n  type: lstm\n  hidden: 32\n  residual_to: seasonal_naive\n"
                                  "train:\n  epochs: 6\n  batch_size: 64\n  log_every: 1000\n  loss: mae\n"
                                  "  optimizer:\n    lr: 0.003\n"
                                  "runtime:\n  threads: 2\n  deterministic: true\n",
                              "double.yaml", dir.path.string());
  const TrainSummary s = train(c, TrainOptions(dir / "run", false, false, true));
  ASSERT_TRUE(s.test_forecast.is_object());
  const double model = s.test_forecast["mae"], naive = s.test_forecast["baseline"]["seasonal_naive"]["mae"];
  EXPECT_LT(model, 0.9 * naive) << "test MAE " << model << " vs the seasonal naive's " << naive;
  EXPECT_LT(s.test_forecast["mase"].get<double>(), s.test_forecast["baseline"]["seasonal_naive"]["mase"].get<double>());
}

// train.monitor val_mae: the best checkpoint is the validation with the lowest MAE (not the
// lowest loss: the loss is Huber here), and a resumed run keeps comparing against it.
TEST(Monitor, BestCheckpointIsTheLowestValMaeAndResumeKeepsIt) {
  TempDir dir;
  const std::string run = dir / "run";
  const std::string args = cli::example_config() + cli::kSmall +
                           " --set train.monitor=val_mae --set train.loss=huber --set train.huber_delta=0.05"
                           " --set train.early_stopping.patience=0 --set train.eval_every=3u --quiet --out " + run;
  Result r = run_seqtrain("train " + args + " --set train.epochs=2");
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("train --resume " + run + " --set train.epochs=4 --quiet");
  ASSERT_EQ(r.rc, 0) << r.out;
  double best = INFINITY;
  int64_t best_step = -1;
  int vals = 0;
  for (const auto& rec : cli::read_metrics(run + "/metrics.jsonl"))
    if (rec["split"] == "val") {
      ++vals;
      ASSERT_TRUE(rec.contains("mae") && rec.contains("baseline")) << rec.dump();
      if (rec["mae"].get<double>() < best) best = rec["mae"], best_step = rec["step"];
    }
  ASSERT_GE(vals, 4);
  const nlohmann::json st = nlohmann::json::parse(slurp(run + "/checkpoints/best/state.json"));
  EXPECT_EQ(st["best_val"].get<double>(), best);
  EXPECT_EQ(st["updates"].get<int64_t>(), best_step);
  const nlohmann::json summary = nlohmann::json::parse(slurp(run + "/summary.json"));
  EXPECT_EQ(summary["monitor"], "val_mae");
  EXPECT_EQ(summary["best_val_mae"].get<double>(), best);
}

// Every val and test record of a csv run carries the errors in units beside the baselines; eval
// of the test split prints the test record's figures; an npy regression run's records carry
// the errors, and the last-value baseline and MASE once data.npy.target_features says where
// each target's past is in X.
TEST(ForecastRecords, CsvAndNpyRunsReportErrorsInUnits) {
  TempDir dir;
  const std::string run = dir / "run";
  Result r = run_seqtrain("train " + cli::example_config() + cli::kSmall +
                          " --set train.epochs=1 --set data.seasons=[12] --quiet --out " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json test;
  for (const auto& rec : cli::read_metrics(run + "/metrics.jsonl"))
    if (rec["split"] != "train" && rec["split"] != "data") {
      for (const char* k : {"mae", "rmse", "mape", "smape", "mase"}) EXPECT_TRUE(rec[k].is_number()) << rec.dump();
      EXPECT_TRUE(rec["baseline"]["last_value"]["mae"].is_number()) << rec.dump();
      EXPECT_TRUE(rec["baseline"]["seasonal_naive"]["mase"].is_number()) << rec.dump();
      if (rec["split"] == "test") test = rec;
    }
  ASSERT_TRUE(test.is_object());
  r = run_seqtrain("eval " + run);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NEAR(cli::value_after(r.out, "mae"), test["mae"].get<double>(), 1e-6);
  EXPECT_NEAR(cli::value_after(r.out, "baseline_seasonal_naive_mae"),
              test["baseline"]["seasonal_naive"]["mae"].get<double>(), 1e-6);
  EXPECT_CONTAINS(r.out, "lag-12 (seasonal) naive");

  Rng rng(4);
  std::vector<float> npy[2][2];  // [train, val][x, y]
  for (int s = 0; s < 2; ++s) {
    const std::string split = s == 0 ? "train" : "val";
    const int64_t n = s == 0 ? 64 : 32;
    npy[s][0] = randn(rng, n * 10 * 2);
    npy[s][1] = randn(rng, n * 3);
    for (float& v : npy[s][0]) v = 5 + 2 * v;  // units far from z-scores, so a missed inversion shows
    write_npy(dir / (split + "_x.npy"), npy[s][0], {n, 10, 2});
    write_npy(dir / (split + "_y.npy"), npy[s][1], {n, 3});
  }
  const std::string cfg = write_file(dir, "npy.yaml",
                                     "data:\n  source: npy\n  npy:\n    train_x: train_x.npy\n    train_y: train_y.npy\n"
                                     "    val_x: val_x.npy\n    val_y: val_y.npy\nmodel:\n  hidden: 8\n"
                                     "train:\n  epochs: 2\n  monitor: val_rmse\nruntime:\n  threads: 1\n");
  r = run_seqtrain("train " + cfg + " --quiet --out " + (dir / "npy_run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  int vals = 0;
  for (const auto& rec : cli::read_metrics(dir / "npy_run/metrics.jsonl"))
    if (rec["split"] == "val") {
      ++vals;
      for (const char* k : {"mae", "rmse", "mape", "smape"}) EXPECT_TRUE(rec[k].is_number()) << rec.dump();
      EXPECT_TRUE(rec["mase"].is_null()) << rec.dump();
      EXPECT_FALSE(rec.contains("baseline")) << rec.dump();
    }
  EXPECT_EQ(vals, 2);
  r = run_seqtrain("eval " + (dir / "npy_run") + " --split val");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "rmse: ");
  EXPECT_CONTAINS(r.out, "mase: n/a (set data.npy.target_features");

  // data.npy.target_features: X's feature 1 is the target's past, so the last-value baseline and
  // MASE are there, equal to a direct computation on the arrays.
  r = run_seqtrain("train " + cfg + " --quiet --set data.npy.target_features=[1] --out " + (dir / "npy_base"));
  ASSERT_EQ(r.rc, 0) << r.out;
  double scale = 0, base_err = 0;
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t t = 1; t < 10; ++t) scale += std::abs(double(npy[0][0][(i * 10 + t) * 2 + 1]) - npy[0][0][(i * 10 + t - 1) * 2 + 1]);
  scale /= 64 * 9;
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t h = 0; h < 3; ++h) base_err += std::abs(double(npy[1][0][(i * 10 + 9) * 2 + 1]) - npy[1][1][i * 3 + h]);
  base_err /= 32 * 3;
  nlohmann::json last;
  for (const auto& rec : cli::read_metrics(dir / "npy_base/metrics.jsonl"))
    if (rec["split"] == "val") last = rec;
  ASSERT_TRUE(last.contains("baseline")) << last.dump();
  EXPECT_NEAR(last["baseline"]["last_value"]["mae"].get<double>(), base_err, 1e-5 * base_err);
  EXPECT_NEAR(last["baseline"]["last_value"]["mase"].get<double>(), base_err / scale, 1e-5 * base_err / scale);
  EXPECT_NEAR(last["mase"].get<double>(), last["mae"].get<double>() / scale, 1e-5 * last["mae"].get<double>() / scale);
  r = run_seqtrain("train " + cfg + " --quiet --set data.npy.target_features=[2] --out " + (dir / "npy_bad"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.out, "data.npy.target_features' names feature 2, but X");
}

// The new keys' errors name the key and the fix; nothing is trained.
TEST(ForecastConfig, BadInputNamesTheKeyAndTheFix) {
  TempDir dir;
  const std::string csv = seasonal_csv(dir, 60);
  const std::string base = "data:\n  source: csv\n  path: " + csv + "\n  lookback: 8\n  targets: [a]\n";
  auto err = [&](const std::string& text) {
    return error_of([&] { load_config_text(text, "bad.yaml", dir.path.string()); });
  };
  std::string e = err(base + "  seasons: [12]\nmodel:\n  residual_to: seasonal_naive\n");
  EXPECT_CONTAINS(e, "data.seasons");
  EXPECT_CONTAINS(e, "longer than data.lookback (8)");
  EXPECT_CONTAINS(err(base + "model:\n  residual_to: seasonal_naive\n"), "data.seasons is empty");
  EXPECT_CONTAINS(err(base + "  seasons: [6, 6]\n"), "lists 6 twice");
  EXPECT_CONTAINS(err(base + "  seasons: [1]\n"), "an integer >= 2");
  EXPECT_CONTAINS(err(base + "  features: [b, c]\nmodel:\n  residual_to: last_value\n"), "target 'a' is not among data.features");
  EXPECT_CONTAINS(err(base + "model:\n  type: gpt\n  residual_to: last_value\n"), "model.residual_to");
  e = err(base + "train:\n  monitor: val_accuracy\n");
  EXPECT_CONTAINS(e, "train.monitor");
  EXPECT_CONTAINS(e, "val_mae");
  EXPECT_CONTAINS(err(base + "  split: [0.9, 0, 0.1]\ntrain:\n  monitor: val_mae\n"), "no validation split");
  EXPECT_CONTAINS(err(base + "train:\n  monitor: val_mea\n"), "did you mean 'val_mae'");
  EXPECT_CONTAINS(err("data:\n  source: npy\n  seasons: [4]\n  npy:\n    train_x: x.npy\n    train_y: y.npy\n"),
                  "data.seasons");
  // At run time: a season column the data already has.
  const std::string clash = write_file(dir, "clash.csv", "a,season6_sin\n1,2\n");
  e = error_of([&] { load_dataset(load_config_text("data:\n  source: csv\n  path: " + clash +
                                                      "\n  lookback: 1\n  targets: [a]\n  seasons: [6]\n", "c.yaml", "")); });
  EXPECT_CONTAINS(e, "season6_sin");
  EXPECT_CONTAINS(e, "rename");
}

}  // namespace
}  // namespace seqtrain::testing

namespace seqtrain::testing {
namespace {

// scripts/fetch_co2.sh with SEQTRAIN_CO2_WHEEL (no network): the wheel's co2.csv is copied out
// with its empty weeks kept; a wheel without it, or one that is no zip, is refused by name.
TEST(FetchCo2, AWheelOnDiskBecomesTheCsvAndBadWheelsAreRefused) {
  TempDir dir;
  fs::create_directories(dir / "w/statsmodels/datasets/co2");
  write_file(dir, "w/statsmodels/datasets/co2/co2.csv", "date,co2\n19580329,316.1\n19580405,\n19580412,317.6\n");
  ASSERT_EQ(run_command("cd " + (dir / "w") + " && /usr/bin/python3 -m zipfile -c ../sm.whl statsmodels > /dev/null"), 0);
  const std::string script = "bash " + source_dir() + "/scripts/fetch_co2.sh ";
  const std::string out = dir / "data/co2.csv";
  ASSERT_EQ(run_command("SEQTRAIN_CO2_WHEEL=" + (dir / "sm.whl") + " " + script + out + " > " + (dir / "log") + " 2>&1"), 0)
      << slurp(dir / "log");
  EXPECT_EQ(slurp(out), "date,co2\n19580329,316.1\n19580405,\n19580412,317.6\n");
  EXPECT_CONTAINS(slurp(dir / "log"), "wrote 3 weeks (1 without a measurement)");
  write_file(dir, "junk.whl", "not a zip");
  EXPECT_NE(run_command("SEQTRAIN_CO2_WHEEL=" + (dir / "junk.whl") + " " + script + (dir / "x.csv") + " > " +
                        (dir / "log") + " 2>&1"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "is not a readable wheel");
  EXPECT_NE(run_command("SEQTRAIN_CO2_WHEEL=" + (dir / "none.whl") + " " + script + (dir / "x.csv") + " > " +
                        (dir / "log") + " 2>&1"), 0);
  EXPECT_CONTAINS(slurp(dir / "log"), "is not a file; point it at statsmodels-0.15.0");
  EXPECT_FALSE(fs::exists(dir / "x.csv")) << "nothing written on a refusal";
}

}  // namespace
}  // namespace seqtrain::testing


namespace seqtrain::testing {
namespace {

// The pinball loss (nn/loss.h) and the monotone quantile output (Backend ops) against PyTorch's
// formulas (seqtrain_torch.models: torch.max(tau e, (tau - 1) e), cumsum of softplus) within 1e-6
// relative, and against finite differences.
TEST(QuantileLoss, SumGradientAndMonotoneOutputEqualTorchAndFiniteDifferences) {
  Rng rng(17);
  const int64_t B = 5, m = 6, Q = 3;
  LossOptions opt;
  opt.quantiles = {0.1f, 0.5f, 0.9f};
  std::vector<float> pred = randn(rng, B * m * Q), target = randn(rng, B * m), grad(pred.size());
  const Tensor tp(pred.data(), {B, m * Q}), tt(target.data(), {B, m});
  const LossSum sum = loss_sum(LossKind::quantile, tp, tt, opt);
  EXPECT_EQ(sum.count, B * m * Q);
  loss_sum_backward(LossKind::quantile, tp, tt, Tensor(grad.data(), {B, m * Q}), 1.0, opt);
  const int64_t G = 7;
  std::vector<float> raw = randn(rng, G * Q, 2.f), dout = randn(rng, G * Q), out(raw.size()), draw(raw.size());
  Backend& be = default_backend();
  be.monotone_quantiles_forward(raw.data(), out.data(), G, Q);
  be.monotone_quantiles_backward(raw.data(), dout.data(), draw.data(), G, Q);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t q = 1; q < Q; ++q) EXPECT_GT(out[g * Q + q], out[g * Q + q - 1]) << "levels never cross";

  TempDir dir;
  write_npy(dir / "pred.npy", pred, {B, m * Q});
  write_npy(dir / "target.npy", target, {B, m});
  write_npy(dir / "raw.npy", raw, {G, Q});
  write_npy(dir / "dout.npy", dout, {G, Q});
  write_npy(dir / "taus.npy", opt.quantiles, {Q});
  ASSERT_EQ(run_python("quantile_ref.py", dir.path.string()), 0);
  const nlohmann::json ref = nlohmann::json::parse(slurp(dir / "ref.json"));
  const double want = ref["loss"];
  EXPECT_NEAR(sum.sum, want, 1e-6 * std::abs(want));
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], ref["grad"][i].get<double>(), 1e-6) << i;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = ref["mono"][i], dg = ref["mono_grad"][i];
    EXPECT_NEAR(out[i], o, 1e-6 * (1 + std::abs(o))) << i;
    EXPECT_NEAR(draw[i], dg, 1e-6 * (1 + std::abs(dg))) << i;
  }
  // Finite differences (float, away from the loss's kinks: random values never tie).
  const float eps = 1e-3f;
  for (size_t i = 0; i < pred.size(); i += 4) {
    const float keep = pred[i];
    pred[i] = keep + eps;
    const double up = loss_sum(LossKind::quantile, tp, tt, opt).sum;
    pred[i] = keep - eps;
    const double down = loss_sum(LossKind::quantile, tp, tt, opt).sum;
    pred[i] = keep;
    EXPECT_NEAR((up - down) / (2 * eps), grad[i], 1e-3) << i;
  }
  auto weighted = [&] {
    be.monotone_quantiles_forward(raw.data(), out.data(), G, Q);
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * dout[i];
    return s;
  };
  for (size_t i = 0; i < raw.size(); ++i) {
    const float keep = raw[i];
    raw[i] = keep + eps;
    const double up = weighted();
    raw[i] = keep - eps;
    const double down = weighted();
    raw[i] = keep;
    EXPECT_NEAR((up - down) / (2 * eps), draw[i], 2e-3 * (1 + std::abs(draw[i]))) << i;
  }
}

// A series whose noise grows over its first half and stays: a short quantile run's 0.1-0.9
// interval covers 75-85% of the test points, its levels never cross, and predict writes one
// column per level in the data's units.
TEST(QuantileLoss, IntervalCoversEightyPercentAndPredictWritesEveryLevel) {
  TempDir dir;
  Rng rng(0);
  std::string csv = "y\n";
  const int N = 6000;
  for (int t = 0; t < N; ++t) {
    const double sigma = 0.1 + 0.9 * std::min(1.0, t / (0.55 * N));
    csv += fmt::format("{:.5f}\n", std::sin(2 * M_PI * t / 24) + sigma * rng.normal());
  }
  const std::string data = write_file(dir, "noisy.csv", csv);
  const std::string config = write_file(dir, "q.yaml",
                                        "data:\n  source: csv\n  path: " + data +
                                            "\n  targets: [y]\n  lookback: 48\n  horizon: 4\n  seasons: [24]\n"
                                            "  split: [0.7, 0.15, 0.15]\n  workers: 0\n"
                                            "model:\n  type: gru\n  hidden: 32\n"
                                            "train:\n  epochs: 12\n  batch_size: 64\n  loss: quantile\n"
                                            "  quantiles: [0.1, 0.5, 0.9]\n  log_every: 1000\n  optimizer:\n    lr: 0.003\n"
                                            "runtime:\n  threads: 2\n  deterministic: true\n");
  Result r = run_seqtrain("train " + config + " --quiet --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json summary = nlohmann::json::parse(slurp(dir / "run/summary.json"));
  const double coverage = summary["test_coverage"];
  EXPECT_GE(coverage, 0.75);
  EXPECT_LE(coverage, 0.85);
  EXPECT_TRUE(summary["test_pinball"].is_number());
  r = run_seqtrain("predict " + (dir / "run") + " --input " + data + " --output " + (dir / "pred.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::istringstream in(slurp(dir / "pred.csv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.substr(0, line.find(",y_t+2")), "y_t+1_q0.1,y_t+1_q0.5,y_t+1_q0.9");
  int rows = 0;
  double mean_median = 0;
  while (std::getline(in, line)) {
    std::vector<double> v;
    for (size_t at = 0; at <= line.size();) {
      const size_t comma = std::min(line.find(',', at), line.size());
      v.push_back(std::stod(line.substr(at, comma - at)));
      at = comma + 1;
    }
    ASSERT_EQ(v.size(), 12u);
    for (size_t k = 0; k < v.size(); k += 3) {
      ASSERT_LE(v[k], v[k + 1]) << "row " << rows;
      ASSERT_LE(v[k + 1], v[k + 2]) << "row " << rows;
    }
    mean_median += v[1];
    ++rows;
  }
  EXPECT_EQ(rows, N - 48 - 4 + 1);
  EXPECT_NEAR(mean_median / rows, 0.0, 0.2) << "the medians are in the data's units (a sine around 0)";
}

TEST(QuantileLoss, BadLevelsNameTheKey) {
  auto err = [](const std::string& q) {
    return error_of([&] { load_config_text("train:\n  loss: quantile\n  quantiles: " + q + "\n", "q.yaml", ""); });
  };
  EXPECT_CONTAINS(err("[0.1, 1.0]"), "train.quantiles");
  EXPECT_CONTAINS(err("[0, 0.5]"), "a number in (0, 1)");
  EXPECT_CONTAINS(err("[0.1, 0.5, 0.5]"), "0.5 repeats 0.5");
  EXPECT_CONTAINS(err("[0.9, 0.1]"), "0.1 comes after 0.9");
  EXPECT_CONTAINS(err("[]"), "is empty");
  EXPECT_CONTAINS(error_of([] {
                    load_config_text("data:\n  source: text\n  path: t.txt\ntrain:\n  loss: quantile\n", "q.yaml", "/tmp");
                  }),
                  "train.loss");
}

}  // namespace
}  // namespace seqtrain::testing

namespace seqtrain::testing {
namespace {

// data.future_features: x continues past the window with the known future's values, every other
// column 0; the target's own future never enters x (changing it changes no forecast), a future
// feature's values over the horizon do change it.
TEST(FutureFeatures, TheTargetsFutureNeverEntersAndAKnownFutureChangesTheForecast) {
  TempDir dir;
  const int rows = 40, L = 6, H = 3;
  auto csv = [&](int variant) {
    Rng rng(2);
    std::string text = "a,b,c\n";
    for (int r = 0; r < rows; ++r) {
      double a = rng.normal(), b = rng.normal(), c = rng.normal();
      if (r >= L && r < L + H) {
        if (variant == 1) a = -3.0 + r;  // the target's future of window 0, changed
        if (variant == 2) b += 1.5;       // the known future of window 0, changed
      }
      text += fmt::format("{:.6f},{:.6f},{:.6f}\n", a, b, c);
    }
    return write_file(dir, fmt::format("v{}.csv", variant), text);
  };
  auto config = [&](const std::string& path) {
    return load_config_text("data:\n  source: csv\n  path: " + path +
                                "\n  targets: [a]\n  lookback: 6\n  horizon: 3\n  split: [1, 0, 0]\n"
                                "  future_features: [b]\nmodel:\n  hidden: 8\n",
                            "f.yaml", dir.path.string());
  };
  const Config c0 = config(csv(0));
  const Dataset d0 = load_dataset(c0);
  ASSERT_EQ(d0.train.steps(), L + H);
  std::vector<float> x0(d0.train.x_size());
  d0.train.fill_batch(0, 1, x0.data(), nullptr);
  for (int h = 0; h < H; ++h) {
    EXPECT_EQ(x0[(L + h) * 3 + 0], 0.f) << "the target's future is no input";
    EXPECT_EQ(x0[(L + h) * 3 + 2], 0.f) << "a feature not known ahead is 0 there";
    EXPECT_EQ(x0[(L + h) * 3 + 1], d0.table->at(L + h, d0.table->column_index("b"))) << "the known future";
  }
  std::unique_ptr<Model> model = build_model(model_spec(c0, d0));
  Rng init(1);
  model->init(init);
  EXPECT_EQ(model->spec().future_steps, H);
  auto forecast_of = [&](int variant) {
    const Dataset d = load_dataset(config(csv(variant)), &d0.normalizer);
    std::vector<float> x(d.train.x_size());
    d.train.fill_batch(0, 1, x.data(), nullptr);
    Arena arena;
    const Tensor out = ModelPass(*model, arena, false).forward(Tensor(x.data(), {1, L + H, 3}));
    return std::vector<float>(out.f32(), out.f32() + out.numel());
  };
  const std::vector<float> base = forecast_of(0);
  EXPECT_EQ(forecast_of(1), base) << "the target's future changed the forecast";
  const std::vector<float> moved = forecast_of(2);
  ASSERT_EQ(moved.size(), base.size());
  double diff = 0;
  for (size_t i = 0; i < base.size(); ++i) diff += std::abs(moved[i] - base[i]);
  EXPECT_GT(diff, 1e-4) << "the known future did not reach the forecast";
}

// forecast --future: the history plus the known future's rows forecasts exactly what predict gives
// for the window whose future is in the file; a run with known-future inputs needs --future, and
// a short --future is refused with both counts.
TEST(FutureFeatures, ForecastWithTheKnownFutureEqualsPredictsLastWindow) {
  TempDir dir;
  Rng rng(5);
  std::string all = "load,plan\n", history = all, future = "plan\n";
  const int rows = 300, H = 4;
  for (int r = 0; r < rows; ++r) {
    const double plan = std::sin(r * 0.3), load = 2 * plan + 0.1 * rng.normal();
    const std::string row = fmt::format("{:.5f},{:.5f}\n", load, plan);
    all += row;
    (r < rows - H ? history : future) += r < rows - H ? row : fmt::format("{:.5f}\n", plan);
  }
  const std::string data = write_file(dir, "all.csv", all);
  write_file(dir, "history.csv", history);
  write_file(dir, "future.csv", future);
  write_file(dir, "short.csv", "plan\n0.5\n");
  const std::string cfg = write_file(dir, "f.yaml", "data:\n  source: csv\n  path: " + data +
                                                        "\n  targets: [load]\n  lookback: 12\n  horizon: 4\n"
                                                        "  future_features: [plan]\n  workers: 0\n"
                                                        "model:\n  hidden: 8\ntrain:\n  epochs: 2\nruntime:\n  threads: 1\n");
  Result r = run_seqtrain("train " + cfg + " --quiet --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("predict " + (dir / "run") + " --input " + data + " --output " + (dir / "pred.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("forecast " + (dir / "run") + " --input " + (dir / "history.csv") + " --future " +
                   (dir / "future.csv") + " --output " + (dir / "next.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string pred = slurp(dir / "pred.csv");
  pred.pop_back();
  const std::string last = pred.substr(pred.rfind('\n') + 1);  // the window ending 4 rows before the end
  std::istringstream next(slurp(dir / "next.csv"));
  std::string line, joined;
  std::getline(next, line);
  EXPECT_EQ(line, "step,load");
  while (std::getline(next, line)) joined += (joined.empty() ? "" : ",") + line.substr(line.find(',') + 1);
  EXPECT_EQ(joined, last);
  r = run_seqtrain("forecast " + (dir / "run") + " --input " + (dir / "history.csv"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.out, "give them with --future F.csv");
  r = run_seqtrain("forecast " + (dir / "run") + " --input " + (dir / "history.csv") + " --future " + (dir / "short.csv"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.out, "1 rows, but the model forecasts 4 steps");
  // Config: a target is never a known-future input; a name the data lacks is refused naming the file.
  EXPECT_CONTAINS(error_of([&] {
                    load_config_text("data:\n  source: csv\n  path: " + data +
                                         "\n  targets: [load]\n  future_features: [load]\n", "f.yaml", "");
                  }),
                  "a target");
  EXPECT_CONTAINS(error_of([&] {
                    load_dataset(load_config_text("data:\n  source: csv\n  path: " + data +
                                                      "\n  targets: [load]\n  lookback: 4\n  future_features: [plans]\n",
                                                  "f.yaml", ""));
                  }),
                  "did you mean 'plan'");
  EXPECT_CONTAINS(error_of([&] {
                    load_config_text("data:\n  source: csv\n  path: " + data +
                                         "\n  targets: [load]\n  future_features: [plan]\n  augment:\n    jitter_sigma: 0.1\n",
                                     "f.yaml", "");
                  }),
                  "data.augment");
}

}  // namespace
}  // namespace seqtrain::testing

namespace seqtrain::testing {
namespace {

// An npy run under the quantile loss: predict writes the levels as y's innermost axis (.npy
// [N, H, levels]) and as named CSV columns, the same numbers, never crossing.
TEST(QuantileLoss, NpyPredictWritesTheLevelsInnermost) {
  TempDir dir;
  Rng rng(8);
  for (const char* split : {"train", "val"}) {
    const int64_t n = split[0] == 't' ? 48 : 16;
    write_npy(dir / (std::string(split) + "_x.npy"), randn(rng, n * 10 * 2), {n, 10, 2});
    write_npy(dir / (std::string(split) + "_y.npy"), randn(rng, n * 3), {n, 3});
  }
  const std::string cfg = write_file(dir, "q.yaml",
                                     "data:\n  source: npy\n  npy:\n    train_x: train_x.npy\n    train_y: train_y.npy\n"
                                     "    val_x: val_x.npy\n    val_y: val_y.npy\nmodel:\n  hidden: 8\n"
                                     "train:\n  epochs: 1\n  loss: quantile\n  quantiles: [0.25, 0.75]\nruntime:\n  threads: 1\n");
  Result r = run_seqtrain("train " + cfg + " --quiet --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("predict " + (dir / "run") + " --input " + (dir / "val_x.npy") + " --output " + (dir / "p.npy"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("predict " + (dir / "run") + " --input " + (dir / "val_x.npy") + " --output " + (dir / "p.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<int64_t> shape;
  const std::vector<double> p = read_npy(dir / "p.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{16, 3, 2}));
  for (size_t i = 0; i + 1 < p.size(); i += 2) EXPECT_LE(p[i], p[i + 1]) << "levels cross at " << i;
  const std::string csv = slurp(dir / "p.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "y_0_q0.25,y_0_q0.75,y_1_q0.25,y_1_q0.75,y_2_q0.25,y_2_q0.75");
  const std::string first = csv.substr(csv.find('\n') + 1, csv.find('\n', csv.find('\n') + 1) - csv.find('\n') - 1);
  EXPECT_NEAR(std::stod(first.substr(first.rfind(',') + 1)), p[5], 1e-5) << "the CSV's last column is y_2_q0.75";
}

}  // namespace
}  // namespace seqtrain::testing
