#include "core/rng.h"

#include <cmath>

#include "core/seed_mix.h"

namespace seqtrain {
namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b) { return seed_mix(a, b); }

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = mix_seed(seed, stream);
  for (auto& v : s_) v = seed_splitmix64(x);
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

void Rng::fill_u64(uint64_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = next_u64();
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

namespace {
// The ziggurat for the half normal f(x) = exp(-x^2 / 2): 128 strips of equal area v. Strip 0
// is the base rectangle [0, r] x [0, f(r)] plus the tail beyond r, drawn as if it were a
// rectangle of width v / f(r); strip i > 0 spans [0, x[i]] horizontally between heights f(x[i])
// and f(x[i+1]). A point drawn uniformly in a strip left of x[i+1] is under the curve whatever
// its height, which is the common case; the rest goes to the wedge test or the tail.
struct Ziggurat {
  static constexpr int kStrips = 128;
  static constexpr double kR = 3.442619855899;          // right edge of the base rectangle
  static constexpr double kArea = 9.91256303526217e-3;  // area of every strip
  double x[kStrips + 1], f[kStrips + 1], inner[kStrips];  // inner[i] = x[i+1] / x[i]
  float xf[kStrips], innerf[kStrips];                     // float copies for the fast path
  Ziggurat() {
    const auto pdf = [](double v) { return std::exp(-0.5 * v * v); };
    x[0] = kArea / pdf(kR);
    x[1] = kR;
    for (int i = 1; i < kStrips - 1; ++i) x[i + 1] = std::sqrt(-2.0 * std::log(kArea / x[i] + pdf(x[i])));
    x[kStrips] = 0.0;
    for (int i = 0; i <= kStrips; ++i) f[i] = pdf(x[i]);
    for (int i = 0; i < kStrips; ++i) inner[i] = x[i + 1] / x[i];
    for (int i = 0; i < kStrips; ++i) {
      xf[i] = static_cast<float>(x[i]);
      // Rounded down, so a point the float test accepts is inside the exact inner rectangle.
      innerf[i] = std::nextafter(static_cast<float>(inner[i]), 0.f);
    }
  }
};

double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0); }

// One ziggurat draw from 32 random bits: strip from the low 7, sign from bit 7, the position
// in the strip from the top 24. The rare cases outside the strip's inner rectangle draw more
// bits from rng.
float ziggurat_slow(const Ziggurat& z, uint32_t u, Rng& rng);

// The common case inline: 98.8% of draws end at the first test.
inline float ziggurat_draw(const Ziggurat& z, uint32_t u, Rng& rng) {
  const int i = static_cast<int>(u & (Ziggurat::kStrips - 1));
  const float w = static_cast<float>(u >> 8) * (1.0f / 16777216.0f);
  if (w < z.innerf[i]) return ((u & Ziggurat::kStrips) ? -w : w) * z.xf[i];
  return ziggurat_slow(z, u, rng);
}

float ziggurat_slow(const Ziggurat& z, uint32_t u, Rng& rng) {
  for (;;) {
    const int i = static_cast<int>(u & (Ziggurat::kStrips - 1));
    const float sign = (u & Ziggurat::kStrips) ? -1.f : 1.f;
    const double w = static_cast<double>(u >> 8) * (1.0 / 16777216.0);
    if (w < z.inner[i]) return sign * static_cast<float>(w * z.x[i]);
    if (i == 0) {
      // The tail beyond r, by Marsaglia's exponential rejection. 1 - unit keeps log finite.
      double a, b;
      do {
        a = -std::log(1.0 - unit(rng.next_u64())) / Ziggurat::kR;
        b = -std::log(1.0 - unit(rng.next_u64()));
      } while (b + b < a * a);
      return sign * static_cast<float>(Ziggurat::kR + a);
    }
    const double xv = w * z.x[i];
    const double y = z.f[i] + unit(rng.next_u64()) * (z.f[i + 1] - z.f[i]);
    if (y < std::exp(-0.5 * xv * xv)) return sign * static_cast<float>(xv);
    u = static_cast<uint32_t>(rng.next_u64() >> 32);
  }
}
}  // namespace

void Rng::add_normal(float* out, int64_t n, float scale) {
  static const Ziggurat z;
  // Two values per 64-bit draw (low half first); an odd n leaves the last draw's high half unused.
  int64_t k = 0;
  for (; k + 1 < n; k += 2) {
    const uint64_t u = next_u64();
    out[k] += scale * ziggurat_draw(z, static_cast<uint32_t>(u), *this);
    out[k + 1] += scale * ziggurat_draw(z, static_cast<uint32_t>(u >> 32), *this);
  }
  if (k < n) out[k] += scale * ziggurat_draw(z, static_cast<uint32_t>(next_u64()), *this);
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
