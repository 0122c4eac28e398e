// Masked-pretraining masks: see masking.h.
#include "data/masking.h"

#include <algorithm>
#include <cmath>

#include "config/config.h"
#include "core/error.h"

namespace seqtrain {
namespace {

// Stream keys: training's masks and the fixed masks of validation/test never share draws.
constexpr uint64_t kTrainStream = 0x3a5c'0001;
constexpr uint64_t kFixedStream = 0x3a5c'0002;

// A sample's draws, taken from its generator 64 at a time (Rng::fill_u64) so the per-position
// loops below never call out of this file.
class Draws {
 public:
  explicit Draws(Rng& rng) : rng_(rng) {}
  uint64_t next() {
    if (pos_ == kChunk) {
      rng_.fill_u64(buf_, kChunk);
      pos_ = 0;
    }
    return buf_[pos_++];
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }        // [0, 1)
  double open_uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1p-53; }  // (0, 1]

 private:
  static constexpr int kChunk = 64;
  Rng& rng_;
  uint64_t buf_[kChunk];
  int pos_ = kChunk;
};

void draw_patch(const MaskOptions& o, Draws& d, int64_t features, int64_t length, float* mask) {
  const int64_t P = o.patch_size, n = (length + P - 1) / P;
  const double want = o.ratio * static_cast<double>(n);
  int64_t k = static_cast<int64_t>(want);
  if (d.uniform() < want - static_cast<double>(k)) ++k;
  // Selection sampling (Knuth's Algorithm S): patch i is chosen with probability left / (n - i).
  for (int64_t i = 0; i < n && k > 0; ++i) {
    if (d.uniform() * static_cast<double>(n - i) >= static_cast<double>(k)) continue;
    --k;
    const int64_t end = std::min(length, (i + 1) * P);
    std::fill(mask + i * P * features, mask + end * features, 1.f);
  }
}

void draw_random(const MaskOptions& o, Draws& d, int64_t n, float* mask) {
  // Two 32-bit draws per 64: a position is masked when its draw is below r * 2^32.
  const auto thr = static_cast<uint64_t>(std::llround(o.ratio * 0x1p32));
  for (int64_t i = 0; i < n; i += 2) {
    const uint64_t u = d.next();
    mask[i] = (u & 0xffffffffu) < thr ? 1.f : 0.f;
    if (i + 1 < n) mask[i + 1] = (u >> 32) < thr ? 1.f : 0.f;
  }
}

void draw_span(const MaskOptions& o, Draws& d, int64_t features, int64_t length, float* mask) {
  const double r = o.ratio, p_masked = 1.0 / o.mean_span, p_unmasked = std::min(1.0, p_masked * r / (1.0 - r));
  // A run ends after each step with probability p: its length is 1 + floor(log u / log(1 - p)).
  const auto inv_log = [](double p) { return p >= 1.0 ? 0.0 : 1.0 / std::log1p(-p); };
  const double inv[2] = {inv_log(p_unmasked), inv_log(p_masked)};  // by state: 0 unmasked, 1 masked
  for (int64_t f = 0; f < features; ++f) {
    int state = d.uniform() < r ? 1 : 0;
    for (int64_t t = 0; t < length; state ^= 1) {
      const double k = std::floor(std::log(d.open_uniform()) * inv[state]);
      const int64_t run = k >= static_cast<double>(length - t) ? length - t : 1 + static_cast<int64_t>(k);
      if (state)
        for (int64_t s = t; s < t + run; ++s) mask[s * features + f] = 1.f;
      t += run;
    }
  }
}

}  // namespace

MaskOptions mask_options(const MaskingConfig& c) {
  MaskOptions o;
  if (c.strategy == "patch") o.strategy = MaskStrategy::patch;
  else if (c.strategy == "random") o.strategy = MaskStrategy::random;
  else if (c.strategy == "span") o.strategy = MaskStrategy::span;
  else fail("config key 'train.masking.strategy' is '{}'; use patch, random or span", c.strategy);
  o.ratio = c.mask_ratio;
  o.patch_size = c.patch_size;
  o.mean_span = c.mean_span;
  return o;
}

Rng SampleMasking::rng(int64_t epoch, int64_t sample) const {
  const uint64_t stream = draw == MaskDraw::per_epoch ? mix_seed(mix_seed(seed, kTrainStream), static_cast<uint64_t>(epoch))
                                                      : mix_seed(seed, kFixedStream);
  return Rng(stream, static_cast<uint64_t>(sample));
}

void draw_mask(const MaskOptions& o, Rng& rng, int64_t steps, int64_t features, int64_t length, float* mask) {
  ST_CHECK(0 <= length && length <= steps, "masking: length {} is outside 0..{} steps", length, steps);
  std::fill(mask, mask + steps * features, 0.f);
  Draws d(rng);
  switch (o.strategy) {
    case MaskStrategy::patch: draw_patch(o, d, features, length, mask); break;
    case MaskStrategy::random: draw_random(o, d, length * features, mask); break;
    case MaskStrategy::span: draw_span(o, d, features, length, mask); break;
  }
}

void fill_masks(const SampleMasking& m, std::span<const int64_t> samples, int64_t epoch, int64_t steps,
                int64_t features, const int64_t* lengths, float* mask) {
  for (size_t i = 0; i < samples.size(); ++i) {
    Rng rng = m.rng(epoch, samples[i]);
    draw_mask(m.options, rng, steps, features, lengths ? lengths[i] : steps,
              mask + static_cast<int64_t>(i) * steps * features);
  }
}

}  // namespace seqtrain
