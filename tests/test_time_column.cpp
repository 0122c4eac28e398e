// data.time_column and data.calendar (data/timestamps.h): timestamps parsed and written back in
// their own form, calendar phases, the rows' spacing; a CSV's time column checked (a cell that is
// no time, mixed forms, times that do not increase: file:line:col and the key); `forecast`
// writing the future steps' times; seasons phased by time, so a history cut anywhere gives the
// same forecast as the whole file.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>

#include "config/config.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/timestamps.h"
#include "test_trainer_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;
using cli::slurp;

TEST(Timestamps, ParseAndFormatEachForm) {
  EXPECT_EQ(parse_timestamp("1970-01-01")->seconds, 0);
  EXPECT_EQ(parse_timestamp("2024-03-05 13:30")->seconds, 1709645400);  // Python's datetime, UTC
  EXPECT_EQ(parse_timestamp("2024-03-05T13:30:00Z")->seconds, 1709645400);
  EXPECT_EQ(parse_timestamp("19580329")->seconds, -371174400);
  EXPECT_EQ(parse_timestamp("19580329")->kind, TimeKind::compact_date);
  EXPECT_EQ(parse_timestamp("2024-03-05")->kind, TimeKind::date);
  EXPECT_EQ(parse_timestamp("17")->kind, TimeKind::number);
  for (const char* s : {"2024-03-05", "2024-03-05 13:30", "2024-03-05 13:30:07", "19580329", "1958-03-29", "42"})
    EXPECT_EQ(format_timestamp(parse_timestamp(s)->seconds, parse_timestamp(s)->kind), s);
  for (const char* bad : {"2024-02-30", "2023-02-29", "2024-13-01", "20241301", "2024-03-05 24:00", "13:30", "abc", "",
                          "2024-03-05 13"})
    EXPECT_FALSE(parse_timestamp(bad).has_value()) << bad;
  EXPECT_TRUE(parse_timestamp("2024-02-29").has_value()) << "a leap day";
}

TEST(Timestamps, CalendarFractionsAndSpacing) {
  const int64_t monday_6am = parse_timestamp("2024-03-04 06:00")->seconds;  // a Monday
  EXPECT_DOUBLE_EQ(*calendar_fraction("hour", monday_6am), 0.25);
  EXPECT_DOUBLE_EQ(*calendar_fraction("dow", monday_6am), 0.25 / 7);
  EXPECT_DOUBLE_EQ(*calendar_fraction("dom", monday_6am), 3.25 / 31);
  EXPECT_DOUBLE_EQ(*calendar_fraction("month", monday_6am), (2 + 3.25 / 31) / 12);
  EXPECT_DOUBLE_EQ(*calendar_fraction("doy", monday_6am), (31 + 29 + 3.25) / 366);  // 2024 is a leap year
  EXPECT_DOUBLE_EQ(*calendar_fraction("minute", parse_timestamp("2024-03-04 06:45")->seconds), 0.75);
  EXPECT_DOUBLE_EQ(*calendar_fraction("dow", parse_timestamp("1958-03-29")->seconds), 5.0 / 7) << "a Saturday";
  EXPECT_FALSE(calendar_fraction("week", 0).has_value());
  // The median spacing: one missing day does not change a daily series' step.
  EXPECT_EQ(time_step({0, 86400, 2 * 86400, 4 * 86400, 5 * 86400}), 86400);
}

TEST(TimeColumn, BadCellsNameTheFileLineColumnAndKey) {
  TempDir dir;
  auto error = [&](const std::string& csv) {
    const std::string path = write_file(dir, "t.csv", csv);
    return error_of([&] { read_csv(path, {"y"}, "error", "time"); });
  };
  std::string e = error("time,y\n2024-03-01,1\nMarch 2,2\n");
  EXPECT_CONTAINS(e, "t.csv:3:1");
  EXPECT_CONTAINS(e, "data.time_column");
  EXPECT_CONTAINS(e, "2024-03-05");
  e = error("time,y\n2024-03-02,1\n2024-03-01,2\n");
  EXPECT_CONTAINS(e, "t.csv:3:1");
  EXPECT_CONTAINS(e, "does not increase");
  EXPECT_CONTAINS(e, "sort the rows");
  EXPECT_CONTAINS(error("time,y\n2024-03-01,1\n2024-03-01,2\n"), "does not increase");
  EXPECT_CONTAINS(error("time,y\n2024-03-01,1\n20240302,2\n"), "written differently");
  EXPECT_CONTAINS(error("y\n1\n"), "no column named 'time' (config key data.time_column)");
  // Rows dropped for missing values take their time with them.
  const std::string path = write_file(dir, "drop.csv", "time,y\n2024-03-01,1\n2024-03-02,\n2024-03-03,3\n");
  const Series s = read_csv(path, {}, "drop", "time");
  EXPECT_EQ(s.columns, std::vector<std::string>{"y"}) << "the time column is no feature";
  ASSERT_EQ(s.times.size(), 2u);
  EXPECT_EQ(s.times[1] - s.times[0], 2 * 86400);
  // Config: the time column is no input, calendar needs it, csv only.
  const std::string base = "data:\n  source: csv\n  path: " + path + "\n  targets: [y]\n";
  auto config_error = [&](const std::string& extra) {
    return error_of([&] { load_config_text(base + extra, "c.yaml", dir.path.string()); });
  };
  EXPECT_CONTAINS(config_error("  time_column: y\n"), "also in data.targets");
  EXPECT_CONTAINS(config_error("  calendar: [hour]\n"), "data.time_column is empty");
  EXPECT_CONTAINS(config_error("  time_column: time\n  calendar: [hours]\n"), "did you mean 'hour'");
  const std::string numbers = write_file(dir, "n.csv", "time,y\n1,1\n2,2\n3,3\n4,4\n5,5\n6,6\n7,7\n8,8\n9,9\n10,10\n");
  e = error_of([&] {
    load_dataset(load_config_text("data:\n  source: csv\n  path: " + numbers +
                                      "\n  targets: [y]\n  lookback: 2\n  time_column: time\n  calendar: [dow]\n",
                                  "c.yaml", ""));
  });
  EXPECT_CONTAINS(e, "plain numbers");
}

// Daily rows from an arbitrary start with a weekly cycle: the forecast's first column is the next
// days' dates, and a history cut at a row that is no whole week from the file's start forecasts
// exactly what the whole file does (the season is phased by date, not by row).
TEST(TimeColumn, ForecastWritesTheNextTimesAndSeasonsArePhasedByTime) {
  TempDir dir;
  Rng rng(3);
  std::string csv = "day,load\n", cut = csv;
  const int64_t first = parse_timestamp("2023-11-20")->seconds;
  for (int r = 0; r < 400; ++r) {
    const std::string row = fmt::format("{},{:.4f}\n", format_timestamp(first + r * 86400, TimeKind::date),
                                        5 + std::sin(2 * M_PI * r / 7) + 0.2 * rng.normal());
    csv += row;
    if (r >= 300) cut += row;  // row 300: 300 % 7 = 6, no whole week from the start
  }
  const std::string data = write_file(dir, "load.csv", csv), history = write_file(dir, "cut.csv", cut);
  const std::string config = write_file(dir, "c.yaml",
                                        "data:\n  source: csv\n  path: " + data +
                                            "\n  targets: [load]\n  time_column: day\n  seasons: [7]\n  calendar: [dow]\n"
                                            "  lookback: 14\n  horizon: 3\n  workers: 0\n"
                                            "model:\n  hidden: 8\ntrain:\n  epochs: 1\nruntime:\n  threads: 1\n");
  Result r = run_seqtrain("train " + config + " --quiet --out " + (dir / "run"));
  ASSERT_EQ(r.rc, 0) << r.out;
  r = run_seqtrain("forecast " + (dir / "run") + " --input " + data + " --output " + (dir / "whole.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string whole = slurp(dir / "whole.csv");
  const std::string last_day = format_timestamp(first + 399 * 86400, TimeKind::date);
  EXPECT_EQ(whole.substr(0, whole.find('\n')), "day,load");
  EXPECT_CONTAINS(whole, "\n" + format_timestamp(first + 400 * 86400, TimeKind::date) + ",");
  EXPECT_CONTAINS(whole, "\n" + format_timestamp(first + 402 * 86400, TimeKind::date) + ",");
  r = run_seqtrain("forecast " + (dir / "run") + " --input " + history + " --output " + (dir / "cut_out.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(slurp(dir / "cut_out.csv"), whole) << "the last day is " << last_day;
  // data export keeps the time column first, in its own form.
  r = run_seqtrain("data export " + config + " --out " + (dir / "export.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string exported = slurp(dir / "export.csv");
  EXPECT_EQ(exported.substr(0, exported.find('\n') + 12), "day,load\n" + format_timestamp(first, TimeKind::date) + ",");
  // predict: each window's row starts with its origin, the time of its last observed row.
  r = run_seqtrain("predict " + (dir / "run") + " --input " + data + " --output " + (dir / "pred.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string pred = slurp(dir / "pred.csv");
  EXPECT_EQ(pred.substr(0, pred.find('\n')), "day,load_t+1,load_t+2,load_t+3");
  EXPECT_CONTAINS(pred, "\n" + format_timestamp(first + 13 * 86400, TimeKind::date) + ",");
  EXPECT_CONTAINS(pred, "\n" + format_timestamp(first + 396 * 86400, TimeKind::date) + ",");
  EXPECT_FALSE(pred.find("\n" + format_timestamp(first + 397 * 86400, TimeKind::date) + ",") != std::string::npos)
      << "no window past the data's end";
}

}  // namespace
}  // namespace seqtrain::testing
