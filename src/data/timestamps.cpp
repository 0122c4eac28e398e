// Timestamps. See timestamps.h.
#include "data/timestamps.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>

#include "config/scalar.h"

namespace seqtrain {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic of Howard Hinnant's
// date algorithms, written out here).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  int64_t y, m, d;
};

Civil civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp + (mp < 10 ? 3 : -9);
  return {yoe + era * 400 + (m <= 2), m, d};
}

bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && leap(y) ? 29 : kDays[m - 1];
}

// `n` digits of `s` from `at` as a number, or -1.
int64_t digits(const std::string& s, size_t at, size_t n) {
  if (at + n > s.size()) return -1;
  int64_t v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

std::optional<int64_t> date_seconds(int64_t y, int64_t m, int64_t d) {
  if (y < 1 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) return std::nullopt;
  return days_from_civil(y, m, d) * 86400;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

std::optional<Timestamp> parse_timestamp(const std::string& text) {
  const std::string& s = text;
  if (s.size() == 8 && digits(s, 0, 8) >= 0) {  // 20240305
    auto t = date_seconds(digits(s, 0, 4), digits(s, 4, 2), digits(s, 6, 2));
    return t ? std::optional<Timestamp>(Timestamp{*t, TimeKind::compact_date}) : std::nullopt;
  }
  if (s.size() >= 10 && s[4] == '-' && s[7] == '-') {
    auto day = date_seconds(digits(s, 0, 4), digits(s, 5, 2), digits(s, 8, 2));
    if (!day) return std::nullopt;
    if (s.size() == 10) return Timestamp{*day, TimeKind::date};
    std::string rest = s.substr(11);
    if (s[10] != ' ' && s[10] != 'T') return std::nullopt;
    if (!rest.empty() && rest.back() == 'Z') rest.pop_back();
    const int64_t h = digits(rest, 0, 2), mi = rest.size() >= 5 && rest[2] == ':' ? digits(rest, 3, 2) : -1;
    int64_t sec = 0;
    if (rest.size() == 8 && rest[5] == ':') sec = digits(rest, 6, 2);
    else if (rest.size() != 5) return std::nullopt;
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59) return std::nullopt;
    return Timestamp{*day + h * 3600 + mi * 60 + sec, TimeKind::datetime};
  }
  if (const auto v = parse_double(s); v && std::isfinite(*v) && std::abs(*v) < 9e15)
    return Timestamp{static_cast<int64_t>(std::llround(*v)), TimeKind::number};
  return std::nullopt;
}

std::string format_timestamp(int64_t seconds, TimeKind kind) {
  if (kind == TimeKind::number || kind == TimeKind::none) return std::to_string(seconds);
  const int64_t days = floor_div(seconds, 86400), in_day = seconds - days * 86400;
  const Civil c = civil_from_days(days);
  if (kind == TimeKind::compact_date) return fmt::format("{:04}{:02}{:02}", c.y, c.m, c.d);
  std::string out = fmt::format("{:04}-{:02}-{:02}", c.y, c.m, c.d);
  if (kind == TimeKind::date) return out;
  out += fmt::format(" {:02}:{:02}", in_day / 3600, in_day / 60 % 60);
  if (in_day % 60) out += fmt::format(":{:02}", in_day % 60);
  return out;
}

int64_t time_step(const std::vector<int64_t>& times) {
  if (times.size() < 2) return 1;
  std::vector<int64_t> d(times.size() - 1);
  for (size_t i = 1; i < times.size(); ++i) d[i - 1] = times[i] - times[i - 1];
  std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
  return std::max<int64_t>(1, d[d.size() / 2]);
}

const std::vector<std::string>& calendar_parts() {
  static const std::vector<std::string> kParts = {"minute", "hour", "dow", "dom", "month", "doy"};
  return kParts;
}

std::optional<double> calendar_fraction(const std::string& part, int64_t seconds) {
  const int64_t days = floor_div(seconds, 86400);
  const double day_frac = static_cast<double>(seconds - days * 86400) / 86400.0;
  const Civil c = civil_from_days(days);
  if (part == "minute") return static_cast<double>((seconds - days * 86400) % 3600) / 3600.0;
  if (part == "hour") return day_frac;
  if (part == "dow") return (static_cast<double>(days + 3 - 7 * floor_div(days + 3, 7)) + day_frac) / 7.0;  // 1970-01-01: Thursday
  if (part == "dom") return (static_cast<double>(c.d - 1) + day_frac) / static_cast<double>(days_in_month(c.y, c.m));
  if (part == "month") return (static_cast<double>(c.m - 1) + (c.d - 1 + day_frac) / days_in_month(c.y, c.m)) / 12.0;
  if (part == "doy") {
    const int64_t first = days_from_civil(c.y, 1, 1);
    return (static_cast<double>(days - first) + day_frac) / (leap(c.y) ? 366.0 : 365.0);
  }
  return std::nullopt;
}

}  // namespace seqtrain
