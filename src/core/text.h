// Small text helpers for messages.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace seqtrain {

// "1 epoch", "2 epochs", "0 epochs": a count with its noun, plural unless the count is 1.
inline std::string count_of(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// "512 B", "3.4 MiB", "11.0 GiB": a byte count in binary units, with `decimals` digits after the
// point (diagnose's lines, the batch finder's log).
inline std::string format_bytes(double bytes, int decimals = 1) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.{}f} {}", bytes, decimals, units[u]);
}

// A value for a message: "nan" for every NaN (fmt writes "-nan" for one with the sign bit set,
// which the same computation gives on some kernels and not others), else as fmt writes it.
inline std::string value_text(double v) { return std::isnan(v) ? "nan" : fmt::format("{}", v); }

}  // namespace seqtrain
