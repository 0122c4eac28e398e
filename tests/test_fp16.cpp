// fp16 mixed precision of the fused RNN kernels (emulated: backend/cpu/gemm_fp16.h): the f32 ->
// fp16 rounding against numpy's float16 conversion, the emulated GEMM against an f32 GEMM of the
// rounded operands, every layer's gradients against fp32's, the loss scale rescuing gradients
// that fp16 alone flushes to zero, and a short training run ending near fp32's loss.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_fp16.h"
#include "models/forecaster.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "precision_run.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool fp16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// Normal, subnormal, tie, overflow, NaN and infinite inputs, then random bit patterns over the
// whole float32 range. An odd count, so the vector loop's scalar tail is used as well.
std::vector<float> conversion_inputs() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 0.1f, 3.14159f, 1.f + 1.f / 2048, 1.f + 3.f / 2048,  // ties
                          65504.f, 65519.f, 65519.99f, 65520.f, 65536.f, 1e5f, -1e5f, 3e38f,           // overflow
                          6.1035156e-05f, 6.0e-05f, 5.96e-08f, 2.98e-08f, 2.9802322e-08f, 2.99e-08f,  // subnormal
                          1e-8f, -1e-6f, 1e-30f, 1e-40f,                                              // underflow
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          bits_to_f32(0x7f800001u), bits_to_f32(0xffc12345u)};
  // Every fp16 subnormal step and its midpoints: ties to even at the smallest scale.
  for (int k = 0; k < 64; ++k) v.push_back(static_cast<float>(k) * 0.5f * 5.9604645e-08f);
  Rng rng(17);
  for (int i = 0; i < 6000; ++i) v.push_back(bits_to_f32(static_cast<uint32_t>(rng.next_u64())));
  // Concentrated where fp16 is interesting: |x| in [2^-26, 2^17].
  for (int i = 0; i < 6001; ++i) v.push_back((i % 2 ? -1.f : 1.f) * std::exp2(rng.uniform(-26.f, 17.f)));
  return v;
}

TEST(Fp16, RoundingMatchesNumpyFloat16) {
  SEQTRAIN_REQUIRE_TORCH();
  TempDir dir;
  const std::vector<float> x = conversion_inputs();
  write_npy(dir / "in.npy", x, {static_cast<int64_t>(x.size())});
  ASSERT_EQ(run_python("fp16_ref.py", (dir / "in.npy") + " " + (dir / "out.npy")), 0);
  const std::vector<double> want = read_npy(dir / "out.npy");
  ASSERT_EQ(want.size(), x.size());
  std::vector<uint16_t> got(x.size());
  f32_to_fp16(x.data(), got.data(), static_cast<int64_t>(x.size()));
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t w = static_cast<uint16_t>(want[i]);
    // NaN payloads are not specified the same way everywhere; NaN must stay NaN (and never
    // become inf).
    const bool ok = fp16_is_nan(w) ? fp16_is_nan(got[i]) : got[i] == w;
    if (!ok && ++bad <= 10)
      ADD_FAILURE() << "x=" << x[i] << " (bits " << std::hex << std::bit_cast<uint32_t>(x[i]) << ") numpy 0x" << w
                    << " seqtrain 0x" << got[i] << std::dec;
    // Widening back is exact: the value numpy's float16 holds.
    if (!fp16_is_nan(w)) {
      const float back = fp16_to_f32(got[i]);
      const float wanted = fp16_to_f32(w);
      if (std::isfinite(wanted)) {
        EXPECT_EQ(back, wanted);
      }
    }
  }
  EXPECT_EQ(bad, 0) << "of " << x.size();
  // The vector widening agrees with the scalar one.
  std::vector<float> wide(got.size());
  fp16_to_f32(got.data(), wide.data(), static_cast<int64_t>(got.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!fp16_is_nan(got[i])) {
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(fp16_to_f32(got[i])));
    }
}

// The emulated GEMM equals an f32 GEMM of the fp16-rounded operands, for each transpose, strided
// operands and accumulation; and it overflows to inf like fp16 does.
TEST(Fp16, GemmIsF32GemmOfRoundedOperands) {
  Rng rng(3);
  const int64_t M = 7, N = 19, K = 33, lda_pad = 5, ldb_pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        const int64_t ar = ta ? K : M, ac = (ta ? M : K) + lda_pad, br = tb ? N : K, bc = (tb ? K : N) + ldb_pad;
        std::vector<float> A(ar * ac), B(br * bc), C0(M * N);
        for (auto& v : A) v = rng.normal() * 3.f;
        for (auto& v : B) v = rng.normal() * 3.f;
        for (auto& v : C0) v = rng.normal();
        std::vector<uint16_t> Ah(A.size()), Bh(B.size());
        f32_to_fp16(A.data(), Ah.data(), A.size());
        f32_to_fp16(B.data(), Bh.data(), B.size());
        std::vector<float> Ar(A.size()), Br(B.size());
        fp16_to_f32(Ah.data(), Ar.data(), Ah.size());
        fp16_to_f32(Bh.data(), Br.data(), Bh.size());
        std::vector<float> want = C0, got = C0;
        gemm(ta, tb, M, N, K, 1.f, Ar.data(), ac, Br.data(), bc, acc ? 1.f : 0.f, want.data(), N);
        gemm_fp16(ta, tb, M, N, K, Ah.data(), ac, Bh.data(), bc, acc, got.data(), N);
        EXPECT_EQ(got, want) << "ta=" << ta << " tb=" << tb << " acc=" << acc;
        // Rounding happened: the unrounded product differs.
        std::vector<float> exact = C0;
        gemm(ta, tb, M, N, K, 1.f, A.data(), ac, B.data(), bc, acc ? 1.f : 0.f, exact.data(), N);
        EXPECT_NE(exact, want);
      }
  std::vector<float> a = {1e5f, 1.f}, b = {1.f, 1.f};
  std::vector<uint16_t> ah(2), bh(2);
  f32_to_fp16(a.data(), ah.data(), 2);
  f32_to_fp16(b.data(), bh.data(), 2);
  float c = 0;
  gemm_fp16(false, false, 1, 1, 2, ah.data(), 2, bh.data(), 1, false, &c, 1);
  EXPECT_TRUE(std::isinf(c)) << c;
}

struct Fp16Case { const char* type; int64_t layers; bool bidir; };
class Fp16Grad : public ::testing::TestWithParam<Fp16Case> {};

// Forward + backward of fp32 and fp16 copies of one model on one batch; the fp16 output
// gradient is multiplied by `scale` and its parameter gradients divided by it again.
void grads_fp32_fp16(const Fp16Case& c, float dy_mag, float scale, std::vector<std::vector<float>>* g32,
                     std::vector<std::vector<float>>* g16, std::vector<std::string>* names) {
  const int64_t N = 32, T = 30, C = 8, H = 32, OUT = 2;
  ModelSpec spec{c.type, C, T, H, c.layers, c.bidir, 0.f, OUT};
  Forecaster f32(spec);
  Forecaster h(spec, ModelEnv{.precision = resolve_precision("fp16")});
  Rng rng(21);
  f32.init(rng);
  std::memcpy(h.params().params(), f32.params().params(), f32.params().size() * sizeof(float));
  std::vector<float> x(N * T * C), dy(N * OUT), dys(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal() * dy_mag;
  for (size_t i = 0; i < dy.size(); ++i) dys[i] = dy[i] * scale;
  Arena a1, a2;
  f32.params().zero_grad();
  ModelPass(f32, a1, true).forward(Tensor(x.data(), {N, T, C}));
  ModelPass(f32, a1, true).backward(Tensor(dy.data(), {N, OUT}));
  h.params().zero_grad();
  ModelPass(h, a2, true).forward(Tensor(x.data(), {N, T, C}));
  ModelPass(h, a2, true).backward(Tensor(dys.data(), {N, OUT}));
  LossScaler unscaler(LossScalerOptions{.init = scale});
  EXPECT_TRUE(unscaler.unscale_finite(h.params().grads(), h.params().size()));
  for (size_t e = 0; e < f32.params().entries().size(); ++e) {
    Tensor a = f32.params().grad(e), b = h.params().grad(e);
    g32->emplace_back(a.f32(), a.f32() + a.numel());
    g16->emplace_back(b.f32(), b.f32() + b.numel());
    names->push_back(f32.params().entries()[e].name);
  }
}

// Gradients of every parameter tensor (each layer, each direction, the head) in fp16 within
// 5e-3 relative (max-abs error over max-abs value) of fp32's, same weights and batch. fp16
// keeps 11 significant bits to bf16's 8, so this is four times tighter than bf16's bound.
TEST_P(Fp16Grad, EveryLayerWithinHalfAPercentOfFp32) {
  std::vector<std::vector<float>> g32, g16;
  std::vector<std::string> names;
  grads_fp32_fp16(GetParam(), 1.f, 1.f, &g32, &g16, &names);
  double worst = 0;
  for (size_t e = 0; e < g32.size(); ++e) {
    const double r = rel_err(g16[e], g32[e]);
    worst = std::max(worst, r);
    EXPECT_LT(r, 5e-3) << names[e];
    // (The top layer's reverse W_hh gradient is exactly zero: the head reads only the last
    // time step, the reverse direction's first, where h_prev is zero.)
    double mag = 0;
    for (float v : g32[e]) mag = std::max(mag, double(std::abs(v)));
    if (names[e].find("rnn.") == 0 && mag > 0) {
      EXPECT_GT(r, 0) << names[e] << ": fp16 rounding left no trace";
    }
  }
  std::printf("[ fp16 ] worst relative gradient error vs fp32: %.2e\n", worst);
}

// Small gradients (a loss gradient of ~1e-6 per element, the size of real per-sample terms):
// fp16 alone flushes the RNN's gate gradients to zero or to a few subnormal bits, while the
// 2^16 loss scale lifts them into fp16's normal range and recovers fp32's gradients. This is
// what shows the backward GEMM operands are fp16, and why fp16 needs the scaler.
TEST_P(Fp16Grad, LossScaleRescuesGradientsFp16WouldFlush) {
  std::vector<std::vector<float>> g32, g16, s32, s16;
  std::vector<std::string> names, snames;
  grads_fp32_fp16(GetParam(), 1e-6f, 1.f, &g32, &g16, &names);
  grads_fp32_fp16(GetParam(), 1e-6f, 65536.f, &s32, &s16, &snames);
  double worst_unscaled = 0;
  for (size_t e = 0; e < g32.size(); ++e) {
    if (names[e].find("rnn.") != 0) continue;
    worst_unscaled = std::max(worst_unscaled, rel_err(g16[e], g32[e]));
    EXPECT_LT(rel_err(s16[e], s32[e]), 5e-3) << snames[e] << " with loss scale 2^16";
  }
  EXPECT_GT(worst_unscaled, 5e-2) << "without loss scaling fp16 should lose these gradients";
}

INSTANTIATE_TEST_SUITE_P(Cells, Fp16Grad,
                         ::testing::Values(Fp16Case{"lstm", 2, false}, Fp16Case{"lstm", 2, true},
                                           Fp16Case{"gru", 2, false}, Fp16Case{"gru", 2, true}),
                         [](const auto& info) {
                           return std::string(info.param.type) + "_l" + std::to_string(info.param.layers) +
                                  (info.param.bidir ? "_bi" : "_uni");
                         });

TEST(Fp16Training, ThreeHundredStepsEndWithinTwoPercentOfFp32) {
  const PrecisionProblem problem = PrecisionProblem::make();
  std::vector<double> l32, l16;
  // GradScaler's defaults, as a user gets them. (With a growth interval of 20 the scale climbs
  // into overflow every few dozen steps; each skipped step is an update the run does not take,
  // so on this still-falling loss curve it trails fp32 by about the skipped count in steps:
  // ~6% at step 300 for 7 skips. The numerics themselves track fp32 to 4 digits until then.)
  LossScaler scaler(LossScalerOptions{});
  const double f32 = problem.train_300("fp32", &l32);
  const double h = problem.train_300("fp16", &l16, &scaler);
  std::printf("[ fp16 ] mean loss of the last 50 of 300 steps: fp32 %.6f, fp16 %.6f; %ld skipped, scale %g\n", f32,
              h, (long)scaler.skipped_total(), scaler.scale());
  EXPECT_LT(f32, 0.7 * l32.front()) << "the fp32 run should learn";
  EXPECT_LT(std::abs(h - f32) / f32, 0.02) << "fp32 " << f32 << " fp16 " << h;
}

}  // namespace
}  // namespace seqtrain::testing
