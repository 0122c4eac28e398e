// The gate passes' vector activations (backend/cpu/kernels/vec.h) against the C library's, at
// every instruction-set level this process may run (each has its own vector width and tail
// handling), over the range the gates see and past the saturation points, in full vectors and
// row tails.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_kernels.h"

namespace seqtrain::testing {
namespace {

std::vector<Isa> runnable_levels() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(active_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

std::vector<float> apply(Isa isa, GateFn fn, const std::vector<float>& x) {
  std::vector<float> y(x.size(), -7.f);
  cpu_kernels(isa).gate_fn(fn, x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

std::vector<float> sweep(float lo, float hi, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
  return v;
}

TEST(GateMath, ExpMatchesLibmWithinFewUlps) {
  const auto x = sweep(-80.f, 80.f, 4099);  // 4099: full vectors and a 3-lane tail at every width
  for (Isa isa : runnable_levels()) {
    const auto y = apply(isa, GateFn::exp, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      EXPECT_LT(std::fabs(y[i] - want) / want, 4e-7) << isa_name(isa) << " x=" << x[i];
    }
  }
}

TEST(GateMath, SigmoidAndTanhMatchLibmAndSaturate) {
  auto x = sweep(-20.f, 20.f, 1001);
  for (float big : {-200.f, -90.f, 90.f, 200.f}) x.push_back(big);  // past exp's float range
  for (Isa isa : runnable_levels()) {
    const auto s = apply(isa, GateFn::sigmoid, x);
    const auto t = apply(isa, GateFn::tanh, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double xd = x[i];
      EXPECT_NEAR(s[i], 1.0 / (1.0 + std::exp(-xd)), 2e-7) << isa_name(isa) << " x=" << x[i];
      EXPECT_NEAR(t[i], std::tanh(xd), 3e-7) << isa_name(isa) << " x=" << x[i];
      EXPECT_TRUE(s[i] >= 0.f && s[i] <= 1.f && t[i] >= -1.f && t[i] <= 1.f) << isa_name(isa) << " x=" << x[i];
    }
  }
}

TEST(GateMath, TailLanesWriteOnlyTheirElements) {
  // Every row length up to two 16-float vectors and a tail: the element past the row stays.
  for (Isa isa : runnable_levels()) {
    for (int64_t n = 1; n <= 37; ++n) {
      std::vector<float> x(n + 1, 0.f), y(n + 1, 5.f);
      cpu_kernels(isa).gate_fn(GateFn::exp, x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], 1.f) << isa_name(isa) << " n=" << n << " i=" << i;
      EXPECT_EQ(y[n], 5.f) << isa_name(isa) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace seqtrain::testing
