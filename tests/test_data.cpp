// Data pipeline: CSV parsing and its errors, chronological splits, window arithmetic and
// layout, normalization fitted on training rows only, epoch order, the synthetic source, and
// load_dataset end to end. Expected numbers are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <numeric>
#include <set>

#include "config/config.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/normalizer.h"
#include "data/split.h"
#include "data/synthetic.h"
#include "data/window_dataset.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::TempDir;

using testing::error_of;
using testing::write_file;

std::string csv_error(const std::string& text, const std::vector<std::string>& cols, const std::string& policy = "error") {
  TempDir dir;
  std::string path = write_file(dir, "x.csv", text);
  return error_of([&] { read_csv(path, cols, policy); });
}

// ---------------------------------------------------------------- CSV

TEST(DataCsv, ReadsRequestedColumnsInRequestedOrder) {
  TempDir dir;
  std::string path = write_file(dir, "s.csv",
                                "time,a,b\n"
                                "2024-01-01T00:00,1.5,-2\n"
                                "2024-01-01T00:01, 2.5 ,1e-3\n"
                                "2024-01-01T00:02,+3,4\n");
  Series s = read_csv(path, {"b", "a"}, "error");
  ASSERT_EQ(s.rows, 3);
  EXPECT_EQ(s.columns, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(s.values, (std::vector<float>{-2.f, 1.5f, 1e-3f, 2.5f, 4.f, 3.f}));
  EXPECT_EQ(s.column_index("a"), 1);
  EXPECT_EQ(s.column_index("time"), -1);
}

TEST(DataCsv, QuotesCrlfBomAndBlankLines) {
  TempDir dir;
  std::string path = write_file(dir, "q.csv", "\xEF\xBB\xBF\"x\",\"y, z\"\r\n1,\"2\"\r\n\r\n3,4\r\n\n");
  Series s = read_csv(path, {}, "error");
  EXPECT_EQ(s.columns, (std::vector<std::string>{"x", "y, z"}));
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.values, (std::vector<float>{1, 2, 3, 4}));
}

TEST(DataCsv, MissingColumnListsAvailableOnes) {
  std::string m = csv_error("voltage,current\n1,2\n", {"voltge"});
  EXPECT_CONTAINS(m, "x.csv");
  EXPECT_CONTAINS(m, "no column named 'voltge'");
  EXPECT_CONTAINS(m, "did you mean 'voltage'?");
  EXPECT_CONTAINS(m, "'voltage', 'current'");
}

TEST(DataCsv, NonNumericCellNamesLineColumnAndText) {
  std::string m = csv_error("a,b\n1,2\n3,abc\n", {"a", "b"});
  EXPECT_CONTAINS(m, "x.csv:3:3");
  EXPECT_CONTAINS(m, "'abc'");
  EXPECT_CONTAINS(m, "column 'b'");
  m = csv_error("a,b\n1,2x\n", {"b"});
  EXPECT_CONTAINS(m, "x.csv:2:3");
  // An unused text column is not parsed.
  EXPECT_EQ(csv_error("a,b\nfoo,2\n", {"b"}), "<no error>");
}

TEST(DataCsv, RaggedRowNamesLineAndCounts) {
  std::string m = csv_error("a,b,c\n1,2,3\n\n4,5\n", {"a"});
  EXPECT_CONTAINS(m, "x.csv:4:");
  EXPECT_CONTAINS(m, "expected 3 cells");
  EXPECT_CONTAINS(m, "got 2");
}

TEST(DataCsv, EmptyFileHeaderOnlyAndMissingFile) {
  std::string m = csv_error("", {});
  EXPECT_CONTAINS(m, "x.csv");
  EXPECT_CONTAINS(m, "empty");
  m = csv_error("a,b\n", {});
  EXPECT_CONTAINS(m, "x.csv");
  EXPECT_CONTAINS(m, "no data rows");
  m = error_of([] { read_csv("/nonexistent/x.csv", {}, "error"); });
  EXPECT_CONTAINS(m, "/nonexistent/x.csv");
  m = csv_error("a,a\n1,2\n", {});
  EXPECT_CONTAINS(m, "x.csv:1:3");
  EXPECT_CONTAINS(m, "twice");
  m = csv_error("a,b\n\"1,2\n", {});
  EXPECT_CONTAINS(m, "x.csv:2:1");
  EXPECT_CONTAINS(m, "unterminated");
}

TEST(DataCsv, NanPolicyError) {
  std::string m = csv_error("a,b\n1,2\n3,nan\n", {"a", "b"});
  EXPECT_CONTAINS(m, "x.csv:3:3");
  EXPECT_CONTAINS(m, "column 'b'");
  EXPECT_CONTAINS(m, "data.nan_policy");
  m = csv_error("a,b\n1,2\n-inf,1\n", {"a", "b"});
  EXPECT_CONTAINS(m, "x.csv:3:1");
  m = csv_error("a,b\n1,2\n4,\n", {"a", "b"});
  EXPECT_CONTAINS(m, "x.csv:3:3");
  EXPECT_CONTAINS(m, "empty cell");
}

TEST(DataCsv, NanPolicyDropSkipsTheRow) {
  TempDir dir;
  std::string path = write_file(dir, "d.csv", "a,b,c\n1,2,x\n3,NaN,y\n5,6,z\n,8,w\n9,10,nan\n");
  Series s = read_csv(path, {"a", "b"}, "drop");
  ASSERT_EQ(s.rows, 3);
  EXPECT_EQ(s.values, (std::vector<float>{1, 2, 5, 6, 9, 10}));  // NaN in unused column c is ignored
  std::string m = csv_error("a\nnan\n", {}, "drop");
  EXPECT_CONTAINS(m, "no data rows left");
}

TEST(DataCsv, NanPolicyFfillRepeatsPreviousRow) {
  TempDir dir;
  std::string path = write_file(dir, "f.csv", "a,b\n1,2\n3,inf\n,nan\n7,8\n");
  Series s = read_csv(path, {"a", "b"}, "ffill");
  ASSERT_EQ(s.rows, 4);
  EXPECT_EQ(s.values, (std::vector<float>{1, 2, 3, 2, 3, 2, 7, 8}));
  std::string m = csv_error("a,b\n1,nan\n2,3\n", {"a", "b"}, "ffill");
  EXPECT_CONTAINS(m, "x.csv:2:3");
  EXPECT_CONTAINS(m, "first data row");
}

// ---------------------------------------------------------------- split

TEST(DataSplit, ChronologicalFloorSemantics) {
  // 10 rows, [0.7, 0.2, 0.1]: train 7, val 2, test = the rest = 1.
  auto r = split_rows(10, {0.7, 0.2, 0.1});
  EXPECT_EQ(r[0], (RowRange{0, 7}));
  EXPECT_EQ(r[1], (RowRange{7, 9}));
  EXPECT_EQ(r[2], (RowRange{9, 10}));
  // 0.29 * 100 is 28.999999999999996 in binary; it still means 29 rows.
  r = split_rows(100, {0.29, 0.3, 0.41});
  EXPECT_EQ(r[0], (RowRange{0, 29}));
  EXPECT_EQ(r[1], (RowRange{29, 59}));
  EXPECT_EQ(r[2], (RowRange{59, 100}));
  // Fractions summing to 1 give test every leftover row: 1005 * 0.1 = 100.5 -> 100, test 101.
  r = split_rows(1005, {0.8, 0.1, 0.1});
  EXPECT_EQ(r[0], (RowRange{0, 804}));
  EXPECT_EQ(r[1], (RowRange{804, 904}));
  EXPECT_EQ(r[2], (RowRange{904, 1005}));
  // Summing to less than 1: test is floor(N*f2) and the last rows go unused.
  r = split_rows(100, {0.5, 0.2, 0.1});
  EXPECT_EQ(r[2], (RowRange{70, 80}));
  // f2 == 0: no test rows even though rounding left one over.
  r = split_rows(101, {0.8, 0.2, 0.0});
  EXPECT_EQ(r[0], (RowRange{0, 80}));
  EXPECT_EQ(r[1], (RowRange{80, 100}));
  EXPECT_EQ(r[2].size(), 0);
}

TEST(DataSplit, TooShortSplitNamesDataSplitAndRows) {
  auto r = split_rows(100, {0.8, 0.1, 0.1});
  std::string m = error_of([&] { check_split(100, r, {0.8, 0.1, 0.1}, 8, 3); });
  EXPECT_CONTAINS(m, "data.split");
  EXPECT_CONTAINS(m, "validation split 10 of the 100 rows (rows [80, 90))");
  EXPECT_CONTAINS(m, "= 11 rows");
  EXPECT_EQ(error_of([&] { check_split(100, r, {0.8, 0.1, 0.1}, 8, 2); }), "<no error>");
  // An empty split with fraction 0 is allowed.
  auto r0 = split_rows(100, {0.9, 0.1, 0.0});
  EXPECT_EQ(error_of([&] { check_split(100, r0, {0.9, 0.1, 0.0}, 8, 2); }), "<no error>");
  m = error_of([&] { check_split(100, r0, {0.9, 0.1, 0.0}, 95, 1); });
  EXPECT_CONTAINS(m, "train split 90 of the 100 rows");
}

// ---------------------------------------------------------------- windows

TEST(DataWindows, CountFormula) {
  EXPECT_EQ(window_count(10, 3, 2, 1), 6);  // (10 - 5) / 1 + 1
  EXPECT_EQ(window_count(10, 3, 2, 2), 3);  // floor(5 / 2) + 1
  EXPECT_EQ(window_count(10, 3, 2, 5), 2);
  EXPECT_EQ(window_count(10, 3, 2, 6), 1);
  EXPECT_EQ(window_count(5, 3, 2, 1), 1);
  EXPECT_EQ(window_count(4, 3, 2, 1), 0);
  EXPECT_EQ(window_count(0, 1, 1, 1), 0);
  EXPECT_EQ(batch_count(10, 4), 3);
  EXPECT_EQ(batch_count(8, 4), 2);
}

// A table where every value names its row and column: col c of row r holds 100*c + r.
std::shared_ptr<const Series> labelled_table(int64_t rows, int64_t cols) {
  auto s = std::make_shared<Series>();
  for (int64_t c = 0; c < cols; ++c) s->columns.push_back("c" + std::to_string(c));
  s->rows = rows;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) s->values.push_back(static_cast<float>(100 * c + r));
  return s;
}

TEST(DataWindows, LayoutIsTimeMajorAndStaysInsideTheSplit) {
  auto table = labelled_table(20, 3);
  // Split rows [12, 20), features (c2, c0), targets (c1, c0), lookback 3, horizon 2, stride 2:
  // windows = floor((8 - 5) / 2) + 1 = 2, starting at rows 12 and 14.
  WindowDataset ds(table, {12, 20}, {2, 0}, {1, 0}, 3, 2, 2);
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.x_size(), 6);
  EXPECT_EQ(ds.y_size(), 4);
  std::vector<float> x(2 * 6), y(2 * 4);
  ds.fill_batch(std::vector<int64_t>{1, 0}, x.data(), y.data());
  // Window 1: inputs rows 14, 15, 16; targets rows 17, 18 (target order c1, c0 per step).
  std::vector<float> x1 = {214, 14, 215, 15, 216, 16};
  std::vector<float> y1 = {117, 17, 118, 18};
  std::vector<float> x0 = {212, 12, 213, 13, 214, 14};
  std::vector<float> y0 = {115, 15, 116, 16};
  EXPECT_EQ(std::vector<float>(x.begin(), x.begin() + 6), x1);
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 4), y1);
  EXPECT_EQ(std::vector<float>(x.begin() + 6, x.end()), x0);
  EXPECT_EQ(std::vector<float>(y.begin() + 4, y.end()), y0);
  // The (begin, count) form and a null x agree.
  std::vector<float> y2(8);
  ds.fill_batch(0, 2, nullptr, y2.data());
  EXPECT_EQ(std::vector<float>(y2.begin(), y2.begin() + 4), y0);
  EXPECT_EQ(std::vector<float>(y2.begin() + 4, y2.end()), y1);
  EXPECT_CONTAINS(error_of([&] { ds.fill_batch(std::vector<int64_t>{2}, x.data(), y.data()); }), "out of range");
}

// ---------------------------------------------------------------- normalization

Series small_series() {
  // Train rows 0..3 then two later rows with values far outside the training range.
  Series s;
  s.columns = {"a", "k"};
  s.rows = 6;
  s.values = {1, 5, 2, 5, 3, 5, 4, 5, 100, 7, -2, 5};
  return s;
}

TEST(DataNormalizer, ZscoreUsesTrainRowsOnlyPopulationStd) {
  Series s = small_series();
  Normalizer n = Normalizer::fit("zscore", s, 0, 4);
  // a over rows 0..3 = 1,2,3,4: mean 2.5, population variance 1.25, std 1.118033988749895.
  EXPECT_DOUBLE_EQ(n.shift[0], 2.5);
  EXPECT_DOUBLE_EQ(n.scale[0], std::sqrt(1.25));
  // k is constant (5) on the train rows: std 0 becomes scale 1.
  EXPECT_DOUBLE_EQ(n.shift[1], 5.0);
  EXPECT_DOUBLE_EQ(n.scale[1], 1.0);
  n.apply(s);
  EXPECT_FLOAT_EQ(s.at(0, 0), static_cast<float>(-1.5 / std::sqrt(1.25)));
  EXPECT_FLOAT_EQ(s.at(4, 0), static_cast<float>(97.5 / std::sqrt(1.25)));  // 87.2067...
  EXPECT_FLOAT_EQ(s.at(4, 1), 2.0f);
  EXPECT_FLOAT_EQ(s.at(5, 0), static_cast<float>(-4.5 / std::sqrt(1.25)));
}

TEST(DataNormalizer, MinmaxAndNone) {
  Series s = small_series();
  Normalizer n = Normalizer::fit("minmax", s, 0, 4);
  EXPECT_DOUBLE_EQ(n.shift[0], 1.0);
  EXPECT_DOUBLE_EQ(n.scale[0], 3.0);
  EXPECT_DOUBLE_EQ(n.scale[1], 1.0);  // range 0
  n.apply(s);
  EXPECT_FLOAT_EQ(s.at(0, 0), 0.0f);
  EXPECT_FLOAT_EQ(s.at(3, 0), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4, 0), 33.0f);  // (100 - 1) / 3: validation data may leave [0, 1]
  EXPECT_FLOAT_EQ(s.at(4, 1), 2.0f);   // (7 - 5) / 1
  Series t = small_series();
  Normalizer none = Normalizer::fit("none", t, 0, 4);
  none.apply(t);
  EXPECT_EQ(t.values, small_series().values);
}

TEST(DataNormalizer, InvertAndJsonRoundTrip) {
  Series s = small_series();
  Normalizer n = Normalizer::fit("zscore", s, 0, 4);
  for (float v : {-3.f, 0.f, 2.5f, 100.f}) EXPECT_NEAR(n.invert(0, n.apply(0, v)), v, 1e-4);
  std::vector<float> ys = {n.apply(0, 10.f), 0.f, n.apply(0, 20.f), 0.f};
  n.invert(0, ys.data(), 2, 2);
  EXPECT_NEAR(ys[0], 10.f, 1e-5);
  EXPECT_NEAR(ys[2], 20.f, 1e-5);
  EXPECT_EQ(ys[1], 0.f);

  Normalizer back = Normalizer::from_json(nlohmann::json::parse(n.to_json().dump()));
  EXPECT_EQ(back, n);  // doubles survive the text round trip exactly
  EXPECT_EQ(n.to_json()["method"], "zscore");
  EXPECT_EQ(n.to_json()["columns"], (nlohmann::json{"a", "k"}));

  nlohmann::json bad = n.to_json();
  bad["scale"][1] = 0.0;
  EXPECT_CONTAINS(error_of([&] { Normalizer::from_json(bad); }), "normalizer.scale[1]");
  bad = n.to_json();
  bad["shift"].erase(1);
  EXPECT_CONTAINS(error_of([&] { Normalizer::from_json(bad); }), "normalizer.shift");
  EXPECT_CONTAINS(error_of([&] { n.index_of("b"); }), "'b'");
}

// ---------------------------------------------------------------- epoch order

TEST(DataShuffle, IdentityWithoutShuffle) {
  auto o = epoch_order(5, false, 123, 7);
  EXPECT_EQ(o, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(epoch_order(0, true, 1, 1).empty());
}

TEST(DataShuffle, DependsOnlyOnSeedAndEpoch) {
  const size_t n = 1000;
  auto e3 = epoch_order(n, true, 42, 3);
  auto e1 = epoch_order(n, true, 42, 1);
  EXPECT_EQ(epoch_order(n, true, 42, 3), e3);  // same inputs, same order, whatever ran before
  EXPECT_EQ(epoch_order(n, true, 42, 1), e1);
  EXPECT_NE(e1, e3);
  EXPECT_NE(epoch_order(n, true, 43, 3), e3);
  std::vector<int64_t> sorted = e3;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(n);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);  // a permutation
  EXPECT_NE(e3, iota);

  // The documented algorithm, spelled out: Fisher-Yates from the back with
  // Rng(mix_seed(seed, epoch)).below(i + 1).
  Rng rng(mix_seed(42, 3));
  std::vector<int64_t> expect = iota;
  for (size_t i = n - 1; i > 0; --i) std::swap(expect[i], expect[rng.below(i + 1)]);
  EXPECT_EQ(e3, expect);
}

// ---------------------------------------------------------------- synthetic

TEST(DataSynthetic, DeterministicAndPhysicallyPlausible) {
  SyntheticConfig cfg;
  cfg.rows = 5000;
  Series a = make_synthetic(cfg), b = make_synthetic(cfg);
  EXPECT_EQ(a.columns, (std::vector<std::string>{"voltage", "current", "temperature", "soc"}));
  ASSERT_EQ(a.rows, 5000);
  EXPECT_EQ(a.values, b.values);
  cfg.seed = 1;
  EXPECT_NE(make_synthetic(cfg).values, a.values);

  int64_t charging = 0, discharging = 0;
  for (int64_t r = 1; r < a.rows; ++r) {
    float v = a.at(r, 0), i = a.at(r, 1), t = a.at(r, 2), soc = a.at(r, 3);
    ASSERT_TRUE(std::isfinite(v) && std::isfinite(i) && std::isfinite(t));
    EXPECT_GE(soc, 0.f);
    EXPECT_LE(soc, 1.f);
    EXPECT_GT(v, 3.0f);
    EXPECT_LT(v, 4.4f);
    EXPECT_GT(t, 15.f);
    EXPECT_LT(t, 60.f);
    // Current sign follows the direction of the state of charge (positive = discharge);
    // soc moves by current / 300 a row, so 1.5e-4 is 0.045 A, nine times the current noise.
    float dsoc = soc - a.at(r - 1, 3);
    if (dsoc < -1.5e-4f) { EXPECT_GT(i, 0.f) << "row " << r; ++discharging; }
    if (dsoc > 1.5e-4f) { EXPECT_LT(i, 0.f) << "row " << r; ++charging; }
  }
  EXPECT_GT(charging, 500);
  EXPECT_GT(discharging, 500);
  // The OCV curve is monotone from 3.2 V to 4.2 V.
  EXPECT_NEAR(synthetic_ocv(0), 3.2, 1e-9);
  EXPECT_NEAR(synthetic_ocv(1), 4.2, 1e-3);
  for (double s = 0; s < 1; s += 0.01) EXPECT_LT(synthetic_ocv(s), synthetic_ocv(s + 0.01));
}

// Solves the normal equations (A^T A + eps I) w = A^T b by Gaussian elimination.
std::vector<double> least_squares(const std::vector<std::vector<double>>& rows, const std::vector<double>& b) {
  const size_t k = rows[0].size();
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) m[i][j] += rows[r][i] * rows[r][j];
      m[i][k] += rows[r][i] * b[r];
    }
  for (size_t i = 0; i < k; ++i) m[i][i] += 1e-9;
  for (size_t c = 0; c < k; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::abs(m[r][c]) > std::abs(m[p][c])) p = r;
    std::swap(m[c], m[p]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      double f = m[r][c] / m[c][c];
      for (size_t j = c; j <= k; ++j) m[r][j] -= f * m[c][j];
    }
  }
  std::vector<double> w(k);
  for (size_t i = 0; i < k; ++i) w[i] = m[i][k] / m[i][i];
  return w;
}

TEST(DataSynthetic, WindowPredictsNextVoltageFarBetterThanLastValue) {
  // A linear model over the last 8 steps of all four columns, fitted on the first 80% and
  // scored on the rest, must beat "next = last value" by a wide margin: the series has
  // structure a forecaster can learn (trends, RC relaxation), not just noise.
  SyntheticConfig cfg;
  cfg.rows = 20000;
  Series s = make_synthetic(cfg);
  const int64_t lb = 8, split = 16000;
  std::vector<std::vector<double>> a_train, a_test;
  std::vector<double> b_train, b_test, last_test;
  for (int64_t t = lb; t < s.rows; ++t) {
    std::vector<double> f = {1.0};
    double last = s.at(t - 1, 0);
    for (int64_t k = 1; k <= lb; ++k)
      for (int64_t c = 0; c < 4; ++c) f.push_back(s.at(t - k, c) - (c == 0 ? last : 0.0));
    double target = s.at(t, 0) - last;  // predict the change, which is well conditioned
    if (t < split) { a_train.push_back(f); b_train.push_back(target); }
    else { a_test.push_back(f); b_test.push_back(target); }
  }
  auto w = least_squares(a_train, b_train);
  double mse_model = 0, mse_last = 0;
  for (size_t r = 0; r < a_test.size(); ++r) {
    double p = std::inner_product(w.begin(), w.end(), a_test[r].begin(), 0.0);
    mse_model += (p - b_test[r]) * (p - b_test[r]);
    mse_last += b_test[r] * b_test[r];
  }
  mse_model /= a_test.size();
  mse_last /= a_test.size();
  std::cout << "next-voltage MSE: linear window model " << mse_model << ", last value " << mse_last << "\n";
  EXPECT_LT(mse_model, 0.25 * mse_last) << "model " << mse_model << " last-value " << mse_last;
}

// ---------------------------------------------------------------- load_dataset

// 10 rows: t is text (unused); a = row index; b = 2 on rows 0..5 and 5 on rows 6..9.
std::string hand_csv(const TempDir& dir) {
  std::string text = "t,a,b\n";
  for (int r = 0; r < 10; ++r) text += fmt::format("2024-01-0{},{},{}\n", r, r, r < 6 ? 2 : 5);
  return write_file(dir, "hand.csv", text);
}

TEST(DataLoad, CsvEndToEndNormalizedOnTrainRows) {
  TempDir dir;
  Config c = load_config("", {"data.source=csv", "data.path=" + hand_csv(dir), "data.features=[a, b]",
                              "data.targets=[a]", "data.lookback=2", "data.horizon=1", "data.split=[0.6, 0.4, 0]",
                              "data.normalize=zscore"});
  Dataset ds = load_dataset(c);
  // Train rows [0, 6), val rows [6, 10), no test.
  EXPECT_EQ(ds.splits[0], (RowRange{0, 6}));
  EXPECT_EQ(ds.splits[1], (RowRange{6, 10}));
  EXPECT_EQ(ds.splits[2].size(), 0);
  EXPECT_EQ(ds.train.size(), 4);  // (6 - 3) / 1 + 1
  EXPECT_EQ(ds.val.size(), 2);    // (4 - 3) / 1 + 1
  EXPECT_EQ(ds.test.size(), 0);
  EXPECT_EQ(ds.features, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ds.targets, std::vector<std::string>{"a"});
  EXPECT_EQ(ds.n_features(), 2);
  EXPECT_EQ(ds.n_targets(), 1);
  // a on train rows 0..5: mean 2.5, population variance 17.5 / 6; b constant 2 -> scale 1.
  const double sd = std::sqrt(17.5 / 6.0);  // 1.7078251276599330
  EXPECT_DOUBLE_EQ(ds.normalizer.shift[0], 2.5);
  EXPECT_DOUBLE_EQ(ds.normalizer.scale[0], sd);
  EXPECT_DOUBLE_EQ(ds.normalizer.shift[1], 2.0);
  EXPECT_DOUBLE_EQ(ds.normalizer.scale[1], 1.0);
  // Last validation window: inputs rows 7, 8; target row 9.
  std::vector<float> x(4), y(1);
  ds.val.fill_batch(1, 1, x.data(), y.data());
  EXPECT_FLOAT_EQ(x[0], static_cast<float>((7 - 2.5) / sd));
  EXPECT_FLOAT_EQ(x[1], 3.0f);  // (5 - 2) / 1
  EXPECT_FLOAT_EQ(x[2], static_cast<float>((8 - 2.5) / sd));
  EXPECT_FLOAT_EQ(x[3], 3.0f);
  EXPECT_FLOAT_EQ(y[0], static_cast<float>((9 - 2.5) / sd));
  ds.denormalize_targets(y.data(), 1);
  EXPECT_NEAR(y[0], 9.0f, 1e-5);
  // First training window: inputs rows 0, 1; target row 2.
  ds.train.fill_batch(0, 1, x.data(), y.data());
  EXPECT_FLOAT_EQ(x[0], static_cast<float>(-2.5 / sd));
  EXPECT_FLOAT_EQ(x[1], 0.0f);
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(-0.5 / sd));

  // Given statistics (e.g. from a checkpoint) are used as they are.
  Normalizer fixed = ds.normalizer;
  fixed.shift[0] = 0;
  fixed.scale[0] = 2;
  Dataset again = load_dataset(c, &fixed);
  again.train.fill_batch(0, 1, x.data(), y.data());
  EXPECT_FLOAT_EQ(x[0], 0.0f);
  EXPECT_FLOAT_EQ(y[0], 1.0f);  // row 2: (2 - 0) / 2
}

TEST(DataLoad, SyntheticShapesFollowTheConfig) {
  Config c = load_config("", {"data.synthetic.rows=1000", "data.lookback=16", "data.horizon=4", "data.stride=3",
                              "data.targets=[voltage, temperature]"});
  Dataset ds = load_dataset(c);
  EXPECT_EQ(ds.features, (std::vector<std::string>{"voltage", "current", "temperature", "soc"}));
  EXPECT_EQ(ds.splits[0], (RowRange{0, 800}));
  EXPECT_EQ(ds.splits[1], (RowRange{800, 900}));
  EXPECT_EQ(ds.splits[2], (RowRange{900, 1000}));
  EXPECT_EQ(ds.train.size(), (800 - 20) / 3 + 1);
  EXPECT_EQ(ds.val.size(), (100 - 20) / 3 + 1);
  EXPECT_EQ(ds.test.size(), (100 - 20) / 3 + 1);
  EXPECT_EQ(ds.train.x_size(), 16 * 4);
  EXPECT_EQ(ds.train.y_size(), 4 * 2);
  // z-scored on the train rows: the train part of every column has mean ~0 and std ~1.
  for (int64_t col = 0; col < 4; ++col) {
    double sum = 0, sq = 0;
    for (int64_t r = 0; r < 800; ++r) sum += ds.table->at(r, col);
    for (int64_t r = 0; r < 800; ++r) sq += std::pow(ds.table->at(r, col) - sum / 800, 2);
    EXPECT_NEAR(sum / 800, 0.0, 1e-4);
    EXPECT_NEAR(std::sqrt(sq / 800), 1.0, 1e-4);
  }
}

TEST(DataLoad, ErrorsNameTheKeyOrFile) {
  std::string m = error_of([] { load_dataset(load_config("", {"data.targets=[voltge]"})); });
  EXPECT_CONTAINS(m, "data.targets");
  EXPECT_CONTAINS(m, "did you mean 'voltage'?");
  m = error_of([] { load_dataset(load_config("", {"data.features=[voltage, curent]"})); });
  EXPECT_CONTAINS(m, "data.features");
  EXPECT_CONTAINS(m, "'curent'");
  m = error_of([] { load_dataset(load_config("", {"data.synthetic.rows=500", "data.lookback=64"})); });
  EXPECT_CONTAINS(m, "data.split");
  EXPECT_CONTAINS(m, "validation split 50 of the 500 rows");
  TempDir dir;
  std::string path = write_file(dir, "bad.csv", "a,b\n1,2\n3,oops\n");
  m = error_of([&] { load_dataset(load_config("", {"data.source=csv", "data.path=" + path, "data.targets=[b]"})); });
  EXPECT_CONTAINS(m, "bad.csv:3:3");
  std::string good = write_file(dir, "good.csv", "a,b\n1,2\n3,4\n");
  m = error_of([&] { load_dataset(load_config("", {"data.source=csv", "data.path=" + good, "data.targets=[c]"})); });
  EXPECT_CONTAINS(m, "data.targets");
  EXPECT_CONTAINS(m, "good.csv");
  EXPECT_CONTAINS(m, "'c'");
}

TEST(DataLoad, QuickstartExampleLoads) {
  Config c = load_config(testing::source_dir() + "/examples/forecast.yaml");
  // Only what the Quickstart promises; the training knobs are tuned in the file itself.
  EXPECT_EQ(c.data.source, "synthetic");
  EXPECT_EQ(c.model.type, "lstm");
  Dataset ds = load_dataset(c);
  EXPECT_EQ(ds.targets, std::vector<std::string>{"voltage"});
  EXPECT_GT(ds.train.size(), 0);
  EXPECT_GT(ds.val.size(), 0);
  EXPECT_GT(ds.test.size(), 0);
}

}  // namespace
}  // namespace seqtrain
