// The gate passes' vector activations (backend/cpu/gate_math.h) against the C library's, over
// the range the gates see and past the saturation points, in full vectors and row tails.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/gate_math.h"

namespace seqtrain::testing {
namespace {

using gate_math::for_lanes;
using gate_math::vf;

// f applied to v through for_lanes, so rows whose length is not a multiple of 16 take the tail path.
template <class F>
std::vector<float> lanewise(const std::vector<float>& v, F f) {
  std::vector<float> out(v.size(), -7.f);
  for_lanes(static_cast<int64_t>(v.size()), [&](auto l) { l.store(out.data(), f(l.load(v.data()))); });
  return out;
}

std::vector<float> sweep(float lo, float hi, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
  return v;
}

TEST(GateMath, ExpMatchesLibmWithinFewUlps) {
  const auto x = sweep(-80.f, 80.f, 4099);  // 4099: full vectors and a 3-lane tail
  const auto y = lanewise(x, [](vf v) { return gate_math::exp(v); });
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    EXPECT_LT(std::fabs(y[i] - want) / want, 4e-7) << "x=" << x[i];
  }
}

TEST(GateMath, SigmoidAndTanhMatchLibmAndSaturate) {
  auto x = sweep(-20.f, 20.f, 1001);
  for (float big : {-200.f, -90.f, 90.f, 200.f}) x.push_back(big);  // past exp's float range
  const auto s = lanewise(x, [](vf v) { return gate_math::sigmoid(v); });
  const auto t = lanewise(x, [](vf v) { return gate_math::tanh(v); });
  for (size_t i = 0; i < x.size(); ++i) {
    const double xd = x[i];
    EXPECT_NEAR(s[i], 1.0 / (1.0 + std::exp(-xd)), 2e-7) << "x=" << x[i];
    EXPECT_NEAR(t[i], std::tanh(xd), 3e-7) << "x=" << x[i];
    EXPECT_TRUE(s[i] >= 0.f && s[i] <= 1.f && t[i] >= -1.f && t[i] <= 1.f) << "x=" << x[i];
  }
}

TEST(GateMath, TailLanesWriteOnlyTheirElements) {
  // A 21-element row: one full vector and a 5-lane tail; the element past the row stays as it was.
  std::vector<float> buf(22, 5.f);
  for_lanes(21, [&](auto l) { l.store(buf.data(), l.load(buf.data()) + 1.f); });
  for (int i = 0; i < 21; ++i) EXPECT_EQ(buf[i], 6.f) << i;
  EXPECT_EQ(buf[21], 5.f);
}

}  // namespace
}  // namespace seqtrain::testing
