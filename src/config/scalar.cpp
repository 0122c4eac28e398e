#include "config/scalar.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

namespace seqtrain {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return out;
}

// from_chars rejects a leading '+', which people do write ("+3", "1e+3" is fine already).
std::string_view skip_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

template <typename Int>
std::optional<Int> parse_integer(std::string_view text) {
  text = skip_plus(text);
  if (text.empty()) return std::nullopt;
  Int v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size()) return v;
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  // Not a plain integer: accept a float with an exactly integral, representable value.
  auto d = parse_double(text);
  if (!d || !std::isfinite(*d) || std::floor(*d) != *d) return std::nullopt;
  // 2^63 and 2^64 are exact doubles, so these bounds are tight.
  const double lo = std::is_signed_v<Int> ? -9223372036854775808.0 : 0.0;
  const double hi = std::is_signed_v<Int> ? 9223372036854775808.0 : 18446744073709551616.0;
  if (*d < lo || *d >= hi) return std::nullopt;
  return static_cast<Int>(*d);
}

}  // namespace

std::optional<double> parse_double(std::string_view text) {
  text = skip_plus(text);
  if (text.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (end != text.data() + text.size()) return std::nullopt;
  // Out-of-range magnitudes (1e999) report result_out_of_range; treat them as unparseable
  // rather than silently clamping.
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int64(std::string_view text) { return parse_integer<int64_t>(text); }
std::optional<uint64_t> parse_uint64(std::string_view text) {
  if (!text.empty() && text[0] == '-') return std::nullopt;
  return parse_integer<uint64_t>(text);
}

std::optional<int64_t> parse_bytes(std::string_view text) {
  size_t unit_at = text.size();
  while (unit_at > 0 && std::isalpha(static_cast<unsigned char>(text[unit_at - 1]))) --unit_at;
  std::string_view number = text.substr(0, unit_at);
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
  const std::string unit = lower(text.substr(unit_at));
  static const std::pair<const char*, double> units[] = {
      {"", 1},           {"b", 1},          {"kib", 1024.0},   {"mib", 1048576.0}, {"gib", 1073741824.0},
      {"tib", 1099511627776.0}, {"kb", 1e3}, {"mb", 1e6},      {"gb", 1e9},        {"tb", 1e12}};
  const auto v = parse_double(number);
  if (!v || !std::isfinite(*v) || *v <= 0) return std::nullopt;
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = std::floor(*v * scale);
    if (bytes < 1 || bytes >= 9223372036854775808.0) return std::nullopt;
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string s = lower(text);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

}  // namespace seqtrain
