// Many series in one model (issue 38, item 1; data/fleet.h): a long-format CSV (data.series_id)
// or a glob of files is one table of series; windows never cross a series, splits are
// chronological within each, data.normalize_scope series scales each with its own statistics
// (round-tripping exactly), static features are checked constant, short series are left out and
// counted, data.end cuts each series; the scorer reports each series and pools them. Also
// data.synthetic.cells, the synthetic fleet.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "config/config.h"
#include "data/dataset.h"
#include "data/fleet.h"
#include "data/synthetic.h"
#include "test_util.h"
#include "train/forecast_scorer.h"

namespace seqtrain::testing {
namespace {

// Two series with disjoint value ranges: 'low' (a in [0, 100)) and 'high' (a in [1000, 1100)),
// `rows` rows each, interleaved in time order when `interleave` (as a meter log would be) or
// one after the other. Column b is a second input; c is constant per series.
std::string two_series_csv(int64_t rows, bool interleave) {
  std::string text = "t,id,a,b,c\n";
  auto row = [&](const char* id, int64_t r) {
    const bool high = id[0] == 'h';
    const double a = (high ? 1000.0 : 0.0) + static_cast<double>(r) * 99.0 / static_cast<double>(rows) +
                     0.3 * std::sin(0.7 * static_cast<double>(r));
    text += fmt::format("{},{},{},{},{}\n", r, id, a, high ? -5.0 + 0.01 * r : 5.0 - 0.02 * r, high ? 7 : 3);
  };
  if (interleave) {
    for (int64_t r = 0; r < rows; ++r) row("low", r), row("high", r);
  } else {
    for (int64_t r = 0; r < rows; ++r) row("low", r);
    for (int64_t r = 0; r < rows; ++r) row("high", r);
  }
  return text;
}

Config fleet_config(const std::string& path, const std::string& extra = "") {
  return load_config_text("data:\n  source: csv\n  path: " + path +
                              "\n  series_id: id\n  time_column: t\n  features: [a, b]\n  targets: [a]\n"
                              "  lookback: 4\n  horizon: 2\n  split: [0.6, 0.2, 0.2]\n" + extra,
                          "fleet.yaml", "");
}

TEST(Fleet, WindowsNeverMixSeriesAndSplitsAreChronologicalWithinEach) {
  TempDir dir;
  for (const bool interleave : {false, true}) {
    const std::string path = write_file(dir, interleave ? "i.csv" : "g.csv", two_series_csv(50, interleave));
    const Dataset ds = load_dataset(fleet_config(path, "  normalize_scope: series\n"));
    ASSERT_TRUE(ds.fleet);
    ASSERT_EQ(ds.series.size(), 2u);
    EXPECT_EQ(ds.series[0].id, "low");  // ids in the order they first appear
    EXPECT_EQ(ds.series[1].id, "high");
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(ds.series[k].rows(), 50);
      // 50 rows at [0.6, 0.2, 0.2]: 30, 10, 10, each within the series' own rows.
      const int64_t b = ds.series[k].begin;
      EXPECT_EQ(ds.series_splits[k][0], (RowRange{b, b + 30}));
      EXPECT_EQ(ds.series_splits[k][1], (RowRange{b + 30, b + 40}));
      EXPECT_EQ(ds.series_splits[k][2], (RowRange{b + 40, b + 50}));
    }
    // Each split: 2 series x window_count(rows) windows; every value of a window (x's a and y) in one
    // series' range once mapped back with that series' statistics.
    for (const WindowDataset* split : {&ds.train, &ds.val, &ds.test}) {
      const int64_t per = window_count(split == &ds.train ? 30 : 10, 4, 2, 1);
      ASSERT_EQ(split->size(), 2 * per);
      std::vector<float> x(split->x_size()), y(split->y_size());
      for (int64_t w = 0; w < split->size(); ++w) {
        const int64_t k = split->series_of(w);
        EXPECT_EQ(k, w < per ? 0 : 1);
        split->fill_batch(w, 1, x.data(), y.data());
        const Normalizer& n = ds.normalizer_of(k);
        const int64_t a = n.index_of("a");
        std::vector<float> values;
        for (int64_t t = 0; t < 4; ++t) values.push_back(n.invert(a, x[t * 2]));
        for (int64_t h = 0; h < 2; ++h) values.push_back(n.invert(a, y[h]));
        for (float v : values) {
          if (k == 0) EXPECT_LT(v, 200.f) << "window " << w << " of 'low' holds a row of 'high'";
          else EXPECT_GT(v, 900.f) << "window " << w << " of 'high' holds a row of 'low'";
        }
        const int64_t start = split->window_start(w);
        EXPECT_GE(start, ds.series[k].begin);
        EXPECT_LE(start + 6, ds.series[k].end);
      }
    }
    // Per-series statistics: each series' own training rows; every row of the table is scaled
    // with exactly its series' statistics and maps back to the file's value (to float rounding).
    ASSERT_TRUE(ds.normalizer.per_series());
    EXPECT_NEAR(ds.normalizer_of(0).shift[0], 30 * 99.0 / 50 / 2, 1.0);
    EXPECT_NEAR(ds.normalizer_of(1).shift[0], 1000 + 30 * 99.0 / 50 / 2, 1.0);
    const Series raw = load_series(fleet_config(path).data);
    for (size_t k = 0; k < 2; ++k)
      for (int64_t r = ds.series[k].begin; r < ds.series[k].end; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          const Normalizer& n = ds.normalizer_of(k);
          EXPECT_EQ(ds.table->at(r, c), static_cast<float>((raw.at(r, c) - n.shift[c]) / n.scale[c])) << "row " << r;
          EXPECT_NEAR(n.invert(c, ds.table->at(r, c)), raw.at(r, c), 1e-6 * (std::abs(raw.at(r, c)) + n.scale[c]))
              << "row " << r;
        }
    // The statistics survive state.json: the same normalizer back, the same table from it.
    const Normalizer back = Normalizer::from_json(ds.normalizer.to_json());
    EXPECT_EQ(back, ds.normalizer);
    const Dataset again = load_dataset(fleet_config(path, "  normalize_scope: series\n"), &back);
    EXPECT_EQ(again.table->values, ds.table->values);
  }
  // Interleaved and grouped files are the same fleet.
  const Dataset g = load_dataset(fleet_config(dir / "g.csv"));
  const Dataset i = load_dataset(fleet_config(dir / "i.csv"));
  EXPECT_EQ(g.table->values, i.table->values);
  EXPECT_EQ(g.table->times, i.table->times);
  // Global scope: one set of statistics fitted on both series' training rows.
  EXPECT_FALSE(g.normalizer.per_series());
  EXPECT_NEAR(g.normalizer.shift[0], 500 + 30 * 99.0 / 50 / 2, 1.0);
}

TEST(Fleet, AGlobIsOneSeriesPerFileNamedByItsStem) {
  TempDir dir;
  fs::create_directories(dir / "cells");
  for (int k = 0; k < 3; ++k) {
    std::string text = "a,b\n";
    for (int r = 0; r < 20 + 10 * k; ++r) text += fmt::format("{},{}\n", 100 * k + r, r % 3);
    write_file(dir, fmt::format("cells/cell_{}.csv", k), text);
  }
  const Config c = load_config_text("data:\n  source: csv\n  path: " + (dir / "cells/*.csv") +
                                        "\n  targets: [a]\n  lookback: 5\n  horizon: 1\n  split: [1, 0, 0]\n",
                                    "g.yaml", "");
  const Dataset ds = load_dataset(c);
  ASSERT_EQ(ds.series.size(), 3u);
  EXPECT_EQ(ds.series[2].id, "cell_2");
  EXPECT_EQ(ds.series[2].rows(), 40);
  EXPECT_EQ(ds.train.size(), (20 - 5) + (30 - 5) + (40 - 5));
  EXPECT_TRUE(is_fleet(c.data));
  // A glob that matches nothing names the key and the pattern.
  const std::string e = error_of([&] {
    load_dataset(load_config_text("data:\n  source: csv\n  path: " + (dir / "none/*.csv") + "\n  targets: [a]\n",
                                  "g.yaml", ""));
  });
  EXPECT_CONTAINS(e, "data.path: no file matches");
  EXPECT_CONTAINS(e, "none/*.csv");
}

TEST(Fleet, ShortSeriesAreLeftOutAndCountedAndAllShortNamesTheLongest) {
  TempDir dir;
  std::string text = "id,a\n";
  for (int r = 0; r < 40; ++r) text += fmt::format("long,{}\n", r);
  for (int r = 0; r < 5; ++r) text += fmt::format("tiny,{}\n", r);
  for (int r = 0; r < 7; ++r) text += fmt::format("small,{}\n", r);
  const std::string path = write_file(dir, "f.csv", text);
  const auto config = [&](int64_t lookback) {
    return load_config_text(fmt::format("data:\n  source: csv\n  path: {}\n  series_id: id\n  targets: [a]\n"
                                        "  lookback: {}\n  horizon: 2\n  split: [1, 0, 0]\n", path, lookback),
                            "s.yaml", "");
  };
  const Dataset ds = load_dataset(config(6));
  EXPECT_EQ(ds.series.size(), 1u);
  EXPECT_EQ(ds.skipped_series, 2);
  EXPECT_CONTAINS(ds.skipped_note, "2 series shorter than data.lookback + data.horizon = 8 rows left out");
  const std::string e = error_of([&] { load_dataset(config(40)); });
  EXPECT_CONTAINS(e, "every one of the 3 series");
  EXPECT_CONTAINS(e, "the longest, 'long', has 40 rows");
  EXPECT_CONTAINS(e, "data.lookback + data.horizon = 42");
}

TEST(Fleet, BadInputsNameTheKeyFileAndSeries) {
  TempDir dir;
  const std::string path = write_file(dir, "f.csv", two_series_csv(30, false));
  // The series column missing from the file.
  std::string e = error_of([&] {
    load_dataset(load_config_text("data:\n  source: csv\n  path: " + path +
                                      "\n  series_id: cell\n  features: [a]\n  targets: [a]\n  lookback: 4\n",
                                  "f.yaml", ""));
  });
  EXPECT_CONTAINS(e, "no column named 'cell' (config key data.series_id");
  EXPECT_CONTAINS(e, "f.csv");
  // A static feature that varies within a series.
  e = error_of([&] { load_dataset(fleet_config(path, "  static_features: [b]\n")); });
  EXPECT_CONTAINS(e, "data.static_features");
  EXPECT_CONTAINS(e, "changes within the series 'low'");
  // One that does not: an input, scaled globally even with per-series statistics (each series
  // alone would scale its constant to 0).
  const Dataset ds = load_dataset(fleet_config(path, "  static_features: [c]\n  normalize_scope: series\n"));
  EXPECT_EQ(ds.features, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ds.normalizer_of(0).shift[2], ds.normalizer.shift[2]);
  EXPECT_NE(ds.table->at(ds.series[0].begin, 2), ds.table->at(ds.series[1].begin, 2));
  // The id column is no input.
  e = error_of([&] { fleet_config(path, "  static_features: [id]\n"); });
  EXPECT_CONTAINS(e, "data.series_id");
  // A series unknown to per-series statistics.
  Normalizer only_low = ds.normalizer;
  only_low.series.pop_back();
  only_low.series_shift.pop_back();
  only_low.series_scale.pop_back();
  e = error_of([&] { load_dataset(fleet_config(path, "  static_features: [c]\n"), &only_low); });
  EXPECT_CONTAINS(e, "series 'high' has no normalization statistics of its own");
}

TEST(Fleet, DataEndCutsEverySeries) {
  TempDir dir;
  const std::string path = write_file(dir, "f.csv", two_series_csv(30, true));
  auto rows_of = [&](const std::string& end) {
    const Series s = load_series(fleet_config(path, "  end: \"" + end + "\"\n").data);
    std::vector<int64_t> out;
    for (const SeriesSegment& p : s.segments) out.push_back(p.rows());
    return out;
  };
  EXPECT_EQ(rows_of("20"), (std::vector<int64_t>{20, 20}));
  EXPECT_EQ(rows_of("-7"), (std::vector<int64_t>{23, 23}));
  EXPECT_EQ(end_row("2001-01-02", 3, std::vector<int64_t>{978220800, 978307200, 978393600}.data()), 2);
  EXPECT_CONTAINS(error_of([&] { fleet_config(path, "  end: soon\n"); }), "data.end");
  EXPECT_CONTAINS(error_of([&] { fleet_config(path, "  end: 0\n"); }), "data.end");
}

TEST(Fleet, SyntheticCellsDifferAndEachIsItsOwn) {
  SyntheticConfig c;
  c.rows = 300;
  c.cells = 4;
  const Series s = make_synthetic(c);
  ASSERT_EQ(s.segments.size(), 4u);
  EXPECT_EQ(s.segments[3].id, "cell_003");
  EXPECT_EQ(s.columns, (std::vector<std::string>{"voltage", "current", "temperature", "soc", "capacity", "resistance",
                                                 "ambient"}));
  std::set<float> capacity, resistance, ambient;
  for (const SeriesSegment& p : s.segments) {
    capacity.insert(s.at(p.begin, 4));
    resistance.insert(s.at(p.begin, 5));
    ambient.insert(s.at(p.begin, 6));
    for (int64_t r = p.begin; r < p.end; ++r) ASSERT_EQ(s.at(r, 4), s.at(p.begin, 4)) << "a trait is constant";
  }
  EXPECT_EQ(capacity.size(), 4u);
  EXPECT_EQ(resistance.size(), 4u);
  EXPECT_EQ(ambient.size(), 4u);
  // Cell k does not depend on how many cells there are.
  c.cells = 2;
  const Series two = make_synthetic(c);
  EXPECT_TRUE(std::equal(two.values.begin(), two.values.end(), s.values.begin()));
  // No cells: the one battery series as before.
  c.cells = 0;
  EXPECT_TRUE(make_synthetic(c).segments.empty());
}

TEST(Fleet, TheScorerReportsEachSeriesAndPoolsThem) {
  TempDir dir;
  const std::string path = write_file(dir, "f.csv", two_series_csv(60, false));
  const Dataset ds = load_dataset(fleet_config(path, "  normalize_scope: series\n"));
  const ForecastScoring scoring = ForecastScoring::of(ds, {});
  ASSERT_EQ(scoring.fleet.size(), 2u);
  const WindowDataset& split = ds.test;
  const int64_t n = split.size();
  std::vector<float> x(n * split.x_size()), y(n * split.y_size()), p(y.size());
  split.fill_batch(0, n, x.data(), y.data());
  for (size_t i = 0; i < p.size(); ++i) p[i] = y[i] + 0.1f * static_cast<float>(i % 3);  // a forecast that misses
  ForecastScorer scorer(scoring, [&](int64_t w) { return split.series_of(w); });
  scorer.add(n / 3, x.data(), y.data(), p.data());
  scorer.add(n - n / 3, x.data() + n / 3 * split.x_size(), y.data() + n / 3 * split.y_size(),
             p.data() + n / 3 * split.y_size());
  const nlohmann::json r = scorer.report(true);
  ASSERT_TRUE(r.contains("per_series"));
  const double low = r["per_series"]["low"]["mae"], high = r["per_series"]["high"]["mae"];
  // Each series' error in its own units (its scale); pooled over equal window counts, the mean.
  EXPECT_NEAR(r["mae"].get<double>(), (low + high) / 2, 1e-9);
  EXPECT_NEAR(r["mase"].get<double>(),
              (r["per_series"]["low"]["mase"].get<double>() + r["per_series"]["high"]["mase"].get<double>()) / 2, 1e-9);
  // Recomputed by hand for 'low': |p - y| in units.
  const Normalizer& nl = ds.normalizer_of(0);
  double sum = 0;
  int64_t count = 0;
  for (int64_t w = 0; w < n; ++w)
    if (split.series_of(w) == 0)
      for (int64_t h = 0; h < 2; ++h, ++count)
        sum += std::abs(double(nl.invert(0, p[w * 2 + h])) - nl.invert(0, y[w * 2 + h]));
  EXPECT_NEAR(low, sum / count, 1e-5 * low);
  EXPECT_NEAR(r["baseline"]["last_value"]["mae"].get<double>(),
              (r["per_series"]["low"]["baseline"]["last_value"]["mae"].get<double>() +
               r["per_series"]["high"]["baseline"]["last_value"]["mae"].get<double>()) / 2, 1e-9);
}

}  // namespace
}  // namespace seqtrain::testing
