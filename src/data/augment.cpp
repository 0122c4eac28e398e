// Augmentation transforms. All arithmetic is plain float in a fixed order on one sample at a
// time, so results are bit-identical whatever thread runs them.
#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace seqtrain {

void AugmentOptions::validate(const std::string& p) const {
  const auto finite_nonneg = [&](float v, const char* key) {
    ST_CHECK(std::isfinite(v) && v >= 0, "{}.{} must be a finite number >= 0, got {}", p, key, v);
  };
  finite_nonneg(jitter_sigma, "jitter_sigma");
  finite_nonneg(scale_sigma, "scale_sigma");
  finite_nonneg(warp_sigma, "warp_sigma");
  ST_CHECK(warp_knots >= 1 && warp_knots <= 1024, "{}.warp_knots must be between 1 and 1024, got {}", p, warp_knots);
  ST_CHECK(shift_max >= 0, "{}.shift_max must be >= 0 steps, got {}", p, shift_max);
  ST_CHECK(std::isfinite(mask_prob) && mask_prob >= 0 && mask_prob <= 1,
           "{}.mask_prob must be a probability in [0, 1], got {}", p, mask_prob);
  ST_CHECK(mask_width >= 1, "{}.mask_width must be at least 1 step, got {}", p, mask_width);
}

uint64_t augment_seed(uint64_t seed, int64_t epoch, int64_t sample) {
  return mix_seed(mix_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(sample));
}

void augment_window(const AugmentOptions& opt, uint64_t sample_seed, float* x, int64_t T, int64_t F) {
  if (T <= 0 || F <= 0) return;
  Rng rng(sample_seed);
  if (opt.shift_max > 0) {
    // s > 0 moves the series later in time; rows shifted in repeat the edge row.
    const int64_t m = std::min(opt.shift_max, T - 1);
    const int64_t s = static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * m + 1))) - m;
    if (s != 0) {
      std::vector<float> src(x, x + T * F);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t from = std::clamp<int64_t>(t - s, 0, T - 1);
        std::copy_n(src.data() + from * F, F, x + t * F);
      }
    }
  }
  if (opt.warp_sigma > 0) {
    const int64_t n = opt.warp_knots + 2;  // anchors at both ends plus the inner knots
    // Knots of feature f at knots[f * n ...], drawn feature by feature; then one pass over the
    // window in memory order, each step's position among the knots computed once.
    std::vector<float> knots(static_cast<size_t>(n * F));
    for (auto& k : knots) k = 1.0f + opt.warp_sigma * rng.normal();
    for (int64_t t = 0; t < T; ++t) {
      const float pos = T == 1 ? 0.f : static_cast<float>(t) * static_cast<float>(n - 1) / static_cast<float>(T - 1);
      const int64_t i = std::min<int64_t>(static_cast<int64_t>(pos), n - 2);
      const float w = pos - static_cast<float>(i);
      float* row = x + t * F;
      for (int64_t f = 0; f < F; ++f) row[f] *= knots[f * n + i] * (1.0f - w) + knots[f * n + i + 1] * w;
    }
  }
  if (opt.scale_sigma > 0) {
    for (int64_t f = 0; f < F; ++f) {
      const float factor = 1.0f + opt.scale_sigma * rng.normal();
      for (int64_t t = 0; t < T; ++t) x[t * F + f] *= factor;
    }
  }
  if (opt.jitter_sigma > 0) {
    rng.add_normal(x, T * F, opt.jitter_sigma);
  }
  if (opt.mask_prob > 0) {
    int64_t masked_until = 0;  // runs may overlap; a step is masked while inside any run
    for (int64_t t = 0; t < T; ++t) {
      if (rng.uniform() < opt.mask_prob) masked_until = std::max(masked_until, t + opt.mask_width);
      if (t < masked_until) std::fill_n(x + t * F, F, 0.0f);
    }
  }
}

AugmentedSource::AugmentedSource(const BatchSource& base, AugmentOptions opt, int64_t steps, int64_t features)
    : base_(base), opt_(opt), steps_(steps), features_(features) {
  opt_.validate();
  ST_CHECK(steps_ >= 1 && features_ >= 1 && steps_ * features_ == base_.x_size(),
           "augmentation: a sample of {} steps x {} features does not match the source's {} floats per sample",
           steps_, features_, base_.x_size());
}

void AugmentedSource::fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const {
  base_.fill(idx, epoch, x, y);
  if (!opt_.enabled()) return;
  for (size_t b = 0; b < idx.size(); ++b)
    augment_window(opt_, augment_seed(opt_.seed, epoch, idx[b]), x + static_cast<int64_t>(b) * base_.x_size(), steps_,
                   features_);
}

}  // namespace seqtrain
