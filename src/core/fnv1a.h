// FNV-1a 64: the one hash behind seqtrain's checksums and keys (checkpoint files and state.json,
// config hashes, data cache keys, the binary's identity across ranks). Tiny and the same on every
// platform; it notices damage and change, it is not a security hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace seqtrain {

constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;

// Continues hash h over n bytes at p (start with kFnv1aOffset).
inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aOffset) { return fnv1a(s.data(), s.size(), h); }

}  // namespace seqtrain
