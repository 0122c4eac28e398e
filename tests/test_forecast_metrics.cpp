// Forecast metrics (train/forecast_metrics.h) against numpy on fixed arrays, within 1e-6
// relative: MAE, RMSE, MAPE with zero actuals skipped, sMAPE with 0/0 points, and MASE scaled
// by the naive (lag 1) and seasonal naive (lag 5) in-sample errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "test_trainer_util.h"
#include "test_util.h"
#include "train/forecast_metrics.h"

namespace seqtrain::testing {
namespace {

// A backtest reads the naive's sum at each fold's end in one pass: every read equals the sum taken
// alone, bit for bit (whatever the ends' offsets in the lanes), and the plain sum within rounding.
TEST(ForecastMetrics, NaiveSumReadOnTheWayEqualsTheSumAlone) {
  Rng rng(5);
  const std::vector<float> v = randn(rng, 203);
  for (int64_t lag : {1, 3, 7}) {
    NaiveSum running(v.data(), 1, lag);
    for (int64_t n : {0, 1, 7, 8, 9, 10, 11, 64, 131, 202, 203}) {
      const double on_the_way = running.up_to(n);
      EXPECT_EQ(on_the_way, NaiveSum(v.data(), 1, lag).up_to(n)) << "lag " << lag << " n " << n;
      double plain = 0;
      for (int64_t t = lag; t < n; ++t) plain += std::abs(double(v[t]) - v[t - lag]);
      EXPECT_NEAR(on_the_way, plain, 1e-12 * (1 + plain)) << "lag " << lag << " n " << n;
    }
  }
}

TEST(ForecastMetrics, EqualNumpyOnFixedArrays) {
  Rng rng(11);
  std::vector<float> forecast = randn(rng, 50), actual = randn(rng, 50), train = randn(rng, 80);
  actual[3] = 0;                    // MAPE skips it
  actual[7] = 0, forecast[7] = 0;   // sMAPE counts 0/0 as 0
  for (size_t t = 0; t < train.size(); ++t) train[t] += static_cast<float>(std::sin(t * 2 * M_PI / 5));
  TempDir dir;
  write_npy(dir / "forecast.npy", forecast, {50});
  write_npy(dir / "actual.npy", actual, {50});
  write_npy(dir / "train.npy", train, {80});
  ASSERT_EQ(run_python("forecast_metrics_ref.py", dir.path.string()), 0);
  const nlohmann::json want = nlohmann::json::parse(cli::slurp(dir / "metrics.json"));
  ErrorSums s;
  for (int i = 0; i < 50; ++i) s.add(forecast[i], actual[i]);
  const double scale1 = naive_scale(train.data(), 80, 1, 1), scale5 = naive_scale(train.data(), 80, 1, 5);
  const ForecastMetrics m = metrics_of(s, scale1);
  auto near = [](double got, double expected) { EXPECT_NEAR(got, expected, 1e-6 * std::abs(expected)); };
  near(m.mae, want["mae"]);
  near(m.rmse, want["rmse"]);
  near(m.mape, want["mape"]);
  near(m.smape, want["smape"]);
  near(m.mase, want["mase1"]);
  near(metrics_of(s, scale5).mase, want["mase5"]);
  // Sums of parts are the sums of the whole (per target, then pooled).
  ErrorSums a, b;
  for (int i = 0; i < 20; ++i) a.add(forecast[i], actual[i]);
  for (int i = 20; i < 50; ++i) b.add(forecast[i], actual[i]);
  a += b;
  near(metrics_of(a, scale1).smape, want["smape"]);
  EXPECT_TRUE(std::isnan(metrics_of(ErrorSums{}, 1).mae));
  EXPECT_TRUE(std::isnan(metrics_of(s, 0).mase));
}

}  // namespace
}  // namespace seqtrain::testing
