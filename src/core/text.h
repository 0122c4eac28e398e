// Small text helpers for messages.
#pragma once
#include <cstdint>
#include <string>

namespace seqtrain {

// "1 epoch", "2 epochs", "0 epochs": a count with its noun, plural unless the count is 1.
inline std::string count_of(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace seqtrain
