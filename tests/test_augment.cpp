// Augmentation: each transform's defining property (jitter statistics, one scale factor per
// feature, a piecewise-linear warp curve, a shift with edge repeat, whole-step masks of the
// given width), reproducibility per (seed, epoch, sample) independent of batch composition,
// y left alone, and option validation naming the config key.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "data/augment.h"

namespace seqtrain {
namespace {

using testing::error_of;
// Strictly positive, distinct values so ratios and shifts are identifiable.
std::vector<float> ramp(int64_t T, int64_t F) {
  std::vector<float> x(static_cast<size_t>(T * F));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t f = 0; f < F; ++f) x[t * F + f] = 1.0f + float(t) + 1000.f * float(f);
  return x;
}

TEST(DataAugment, JitterAddsNoiseOfTheGivenSigma) {
  const int64_t T = 4000, F = 2;
  AugmentOptions o;
  o.jitter_sigma = 0.5f;
  auto x = ramp(T, F), a = x;
  augment_window(o, 123, a.data(), T, F);
  double sum = 0, sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = double(a[i]) - double(x[i]);
    sum += d;
    sq += d * d;
  }
  const double n = double(x.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(sd, 0.5, 0.03);
}

TEST(DataAugment, ScalingUsesOneFactorPerFeature) {
  const int64_t T = 50, F = 3;
  AugmentOptions o;
  o.scale_sigma = 0.2f;
  auto x = ramp(T, F), a = x;
  augment_window(o, 7, a.data(), T, F);
  for (int64_t f = 0; f < F; ++f) {
    const float r0 = a[f] / x[f];
    EXPECT_NE(r0, 1.0f);
    for (int64_t t = 1; t < T; ++t) EXPECT_NEAR(a[t * F + f] / x[t * F + f], r0, 1e-5f);
  }
}

TEST(DataAugment, MagnitudeWarpIsAPiecewiseLinearCurvePerFeature) {
  const int64_t T = 61, F = 2;  // knots 4 -> 6 anchors at t = 0, 12, 24, 36, 48, 60
  AugmentOptions o;
  o.warp_sigma = 0.3f;
  o.warp_knots = 4;
  auto x = ramp(T, F), a = x;
  augment_window(o, 99, a.data(), T, F);
  for (int64_t f = 0; f < F; ++f) {
    std::vector<double> r(T);
    for (int64_t t = 0; t < T; ++t) r[t] = double(a[t * F + f]) / double(x[t * F + f]);
    // Linear between anchors: the second difference vanishes except at the anchors.
    for (int64_t t = 1; t + 1 < T; ++t)
      if (t % 12 != 0) {
        EXPECT_NEAR(r[t + 1] - 2 * r[t] + r[t - 1], 0.0, 1e-4) << "t=" << t;
      }
    double lo = 1e9, hi = -1e9;
    for (double v : r) { lo = std::min(lo, v); hi = std::max(hi, v); }
    EXPECT_GT(hi - lo, 0.01) << "the curve should vary over time";
  }
}

TEST(DataAugment, TimeShiftRepeatsTheEdge) {
  const int64_t T = 20, F = 2;
  AugmentOptions o;
  o.shift_max = 5;
  int nonzero = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto x = ramp(T, F), a = x;
    augment_window(o, seed, a.data(), T, F);
    // Recover s from the last row (t = T-1 reads row T-1-s, clamped).
    const int64_t s = (T - 1) - int64_t(a[(T - 1) * F] - 1.0f);
    const int64_t s_first = -int64_t(a[0] - 1.0f);  // for s < 0 row 0 reads row -s
    const int64_t shift = s > 0 ? s : s_first;
    EXPECT_LE(std::abs(shift), 5);
    nonzero += shift != 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t f = 0; f < F; ++f)
        EXPECT_EQ(a[t * F + f], x[std::clamp<int64_t>(t - shift, 0, T - 1) * F + f]) << "seed " << seed;
  }
  EXPECT_GT(nonzero, 25);
}

TEST(DataAugment, MaskingZeroesWholeStepsInRunsOfTheWidth) {
  const int64_t T = 2000, F = 3;
  AugmentOptions o;
  o.mask_prob = 0.02f;
  o.mask_width = 5;
  auto x = ramp(T, F), a = x;
  augment_window(o, 5, a.data(), T, F);
  int64_t masked = 0, run = 0;
  for (int64_t t = 0; t < T; ++t) {
    const bool m = a[t * F] == 0.f;
    for (int64_t f = 0; f < F; ++f) EXPECT_EQ(a[t * F + f] == 0.f, m) << "step " << t << " partly masked";
    if (!m) {
      for (int64_t f = 0; f < F; ++f) EXPECT_EQ(a[t * F + f], x[t * F + f]);
      if (run > 0) {
        EXPECT_GE(run, 5) << "a run shorter than mask_width ends at " << t;
      }
      run = 0;
    } else {
      ++run;
      ++masked;
    }
  }
  // P(step masked) = 1 - 0.98^5 ~ 0.096
  EXPECT_NEAR(double(masked) / double(T), 0.096, 0.03);
}

// Base source: sample i is ramp values + i, y = [i, -i].
struct RampSource : BatchSource {
  int64_t size() const override { return 30; }
  int64_t x_size() const override { return 24; }
  int64_t y_size() const override { return 2; }
  void fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const override {
    auto r = ramp(12, 2);
    for (size_t b = 0; b < idx.size(); ++b) {
      for (int k = 0; k < 24; ++k) x[b * 24 + k] = r[k] + float(idx[b]);
      if (y) { y[b * 2] = float(idx[b]); y[b * 2 + 1] = -float(idx[b]); }
    }
  }
};

TEST(DataAugment, SeededPerSeedEpochSampleIndependentOfBatch) {
  RampSource base;
  AugmentOptions o;
  o.seed = 3;
  o.jitter_sigma = 0.1f;
  o.scale_sigma = 0.1f;
  o.warp_sigma = 0.1f;
  o.shift_max = 2;
  o.mask_prob = 0.1f;
  AugmentedSource src(base, o, 12, 2);
  std::vector<float> x2(48), y2(4), x1(24), y1(2), again(24);
  std::vector<int64_t> pair = {3, 7}, single = {7};
  src.fill(pair, 4, x2.data(), y2.data());
  src.fill(single, 4, x1.data(), y1.data());
  EXPECT_EQ(std::memcmp(x2.data() + 24, x1.data(), 24 * sizeof(float)), 0) << "depends on batch composition";
  EXPECT_EQ(y1, (std::vector<float>{7, -7}));  // targets untouched
  src.fill(single, 5, again.data(), nullptr);
  EXPECT_NE(std::memcmp(again.data(), x1.data(), 24 * sizeof(float)), 0) << "same augmentation in two epochs";
  AugmentOptions o2 = o;
  o2.seed = 4;
  AugmentedSource other(base, o2, 12, 2);
  other.fill(single, 4, again.data(), nullptr);
  EXPECT_NE(std::memcmp(again.data(), x1.data(), 24 * sizeof(float)), 0) << "seed ignored";
  EXPECT_NE(augment_seed(3, 4, 7), augment_seed(3, 7, 4));

  AugmentOptions off;  // nothing enabled: the base data passes through unchanged
  AugmentedSource plain(base, off, 12, 2);
  plain.fill(single, 4, again.data(), nullptr);
  std::vector<float> ref(24);
  base.fill(single, 4, ref.data(), nullptr);
  EXPECT_EQ(again, ref);
}

TEST(DataAugment, ValidationNamesTheKey) {
  RampSource base;
  AugmentOptions o;
  o.jitter_sigma = -1;
  EXPECT_CONTAINS(error_of([&] { o.validate(); }), "data.augment.jitter_sigma must be a finite number >= 0");
  o = {};
  o.mask_prob = 1.5f;
  EXPECT_CONTAINS(error_of([&] { o.validate(); }), "data.augment.mask_prob");
  o = {};
  o.mask_width = 0;
  EXPECT_CONTAINS(error_of([&] { o.validate(); }), "data.augment.mask_width");
  o = {};
  o.warp_knots = 0;
  EXPECT_CONTAINS(error_of([&] { o.validate("aug"); }), "aug.warp_knots");
  o = {};
  o.shift_max = -2;
  EXPECT_CONTAINS(error_of([&] { AugmentedSource(base, o, 12, 2); }), "shift_max");
  EXPECT_CONTAINS(error_of([&] { AugmentedSource(base, {}, 5, 2); }), "5 steps x 2 features");
}

}  // namespace
}  // namespace seqtrain
