// Timestamps of a CSV's time column (data.time_column): what a row's time is, how far apart rows
// are, and how the forecast's future steps are written. One cell is one of
//   date      2024-03-05 or 20240305 (compact, as NOAA's and statsmodels' files write them)
//   datetime  2024-03-05 13:30, 2024-03-05T13:30:00, optional trailing Z (UTC; no other zones)
//   number    a plain number (seconds, a step count): ordered, spaced, but no calendar
// All cells of a column are one kind. Times are seconds since 1970-01-01 UTC (a number is taken
// as is), so the phases of data.seasons and data.calendar are the same in every file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace seqtrain {

enum class TimeKind : uint8_t { none, date, compact_date, datetime, number };

struct Timestamp {
  int64_t seconds = 0;
  TimeKind kind = TimeKind::none;
};

// nullopt when `text` is none of the forms above (or an impossible date such as 2024-02-30).
std::optional<Timestamp> parse_timestamp(const std::string& text);
// `seconds` written as `kind` writes it (a datetime with seconds only when they are not 0).
std::string format_timestamp(int64_t seconds, TimeKind kind);

// The rows' spacing: the median of the differences between consecutive times (robust to a few
// missing rows), at least 1. The forecast's step h after the last row is at last + h * step.
int64_t time_step(const std::vector<int64_t>& times);

// Calendar parts of a time, each as a fraction of its cycle in [0, 1): data.calendar's inputs
// (sine and cosine of 2 pi times the fraction). Names: minute (of the hour), hour (of the day),
// dow (day of the week, Monday 0), dom (day of the month), month (of the year), doy (day of the
// year). Returns nullopt for an unknown name.
std::optional<double> calendar_fraction(const std::string& part, int64_t seconds);
const std::vector<std::string>& calendar_parts();

}  // namespace seqtrain
