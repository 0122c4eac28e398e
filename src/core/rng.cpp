#include "core/rng.h"

#include <cmath>

namespace seqtrain {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ rotl(b, 32) ^ 0x6a09e667f3bcc909ULL;
  splitmix64(x);
  return splitmix64(x) ^ b;
}

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = mix_seed(seed, stream);
  for (auto& v : s_) v = splitmix64(x);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

float Rng::normal() {
  if (has_spare_) { has_spare_ = false; return spare_; }
  // 1 - u keeps the log argument in (0, 1].
  double u1 = 1.0 - static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
  has_spare_ = true;
  return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
}

uint64_t Rng::below(uint64_t n) {
  // Lemire's rejection keeps the result unbiased.
  __uint128_t m = static_cast<__uint128_t>(next_u64()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    uint64_t threshold = -n % n;
    while (low < threshold) {
      m = static_cast<__uint128_t>(next_u64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace seqtrain
