// Mixed precision (bf16 GEMM inputs, fp32 accumulation and master weights) for the fused RNN
// kernels: the bf16 GEMM itself, every layer's gradients against fp32 from the same weights and
// batch, and a 300-step training run that must end within 2% of fp32's loss.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "models/forecaster.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "precision_run.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

#define SEQTRAIN_REQUIRE_BF16()                                                         \
  do {                                                                                  \
    if (!::seqtrain::cpu_has_native_bf16()) GTEST_SKIP() << "CPU has no AVX512-BF16"; \
  } while (0)

std::vector<float> bf16_round(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  f32_to_bf16(v.data(), b.data(), v.size());
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(b[i]);
  return out;
}

TEST(Bf16, ConversionRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to the even mantissa (1.0);
  // 1 + 3*2^-8 goes up to 1.015625. Long enough to take the vector path too.
  std::vector<float> v(40, 1.f + 1.f / 256);
  v[3] = 1.f + 3.f / 256;
  v[37] = 1.f + 3.f / 256;
  v[5] = -2.5f;
  auto r = bf16_round(v);
  EXPECT_EQ(r[0], 1.f);
  EXPECT_EQ(r[39], 1.f);
  EXPECT_EQ(r[3], 1.015625f);
  EXPECT_EQ(r[37], 1.015625f);
  EXPECT_EQ(r[5], -2.5f);
}

TEST(Bf16, WideningIsExactAtEveryLength) {
  // Lengths around the 16-wide vector step, so both the vector loop and the tail run; the
  // widened values must be the rounded ones bit for bit (bf16 -> f32 is exact).
  Rng rng(5);
  for (int64_t n : {1, 15, 16, 17, 40}) {
    std::vector<float> v(n);
    for (auto& e : v) e = rng.normal() * 100.f;
    std::vector<uint16_t> b(n);
    f32_to_bf16(v.data(), b.data(), n);
    std::vector<float> wide(n, -1.f);
    bf16_to_f32(b.data(), wide.data(), n);
    const auto want = bf16_round(v);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(wide[i], want[i]) << "n=" << n << " i=" << i;
      EXPECT_EQ(wide[i], bf16_to_f32(b[i])) << "n=" << n << " i=" << i;
    }
  }
}

TEST(Bf16, GemmMatchesF32GemmOnBf16RoundedInputsForEveryTransposeAndCachesPrimitives) {
  SEQTRAIN_REQUIRE_BF16();
  Rng rng(3);
  const int64_t M = 37, N = 45, K = 29;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc) {
        const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
        std::vector<float> A((ta ? K : M) * lda), B((tb ? N : K) * ldb), C0(M * ldc);
        for (auto& v : A) v = rng.normal();
        for (auto& v : B) v = rng.normal();
        for (auto& v : C0) v = rng.normal();
        A = bf16_round(A);
        B = bf16_round(B);
        std::vector<uint16_t> Ab(A.size()), Bb(B.size());
        f32_to_bf16(A.data(), Ab.data(), A.size());
        f32_to_bf16(B.data(), Bb.data(), B.size());
        std::vector<float> ref = C0, got = C0;
        gemm(ta, tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, acc ? 1.f : 0.f, ref.data(), ldc);
        gemm_bf16(ta, tb, M, N, K, Ab.data(), lda, Bb.data(), ldb, acc, got.data(), ldc);
        // Same bf16-exact inputs, both accumulate in fp32: equal up to summation order.
        std::vector<float> r, g;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) r.push_back(ref[i * ldc + j]), g.push_back(got[i * ldc + j]);
        EXPECT_LT(rel_err(g, r), 1e-5) << "ta=" << ta << " tb=" << tb << " acc=" << acc;
        // The padding columns of C are never touched.
        for (int64_t i = 0; i < M; ++i) EXPECT_EQ(got[i * ldc + N], C0[i * ldc + N]);
      }
  const size_t created = gemm_bf16_primitives_created();
  std::vector<uint16_t> a(8 * 8, 0x3f80), b(8 * 8, 0x3f80);
  std::vector<float> c(64);
  gemm_bf16(false, true, 8, 8, 8, a.data(), 8, b.data(), 8, false, c.data(), 8);
  gemm_bf16(false, true, 8, 8, 8, a.data(), 8, b.data(), 8, false, c.data(), 8);
  EXPECT_LE(gemm_bf16_primitives_created(), created + 1);
  EXPECT_EQ(c[0], 8.f);
}

TEST(Bf16, PrecisionNamesResolve) {
  std::string why;
  EXPECT_EQ(resolve_precision("fp32", &why).compute, DType::f32);
  EXPECT_EQ(resolve_precision("auto", &why).compute, cpu_has_native_bf16() ? DType::bf16 : DType::f32);
  EXPECT_NE(why.find("auto"), std::string::npos);
  // fp16 is never auto's pick; asked for, it runs emulated and the log says so.
  EXPECT_EQ(resolve_precision("fp16", &why).compute, DType::f16);
  EXPECT_CONTAINS(why, "emulated");
  EXPECT_THROW(resolve_precision("bf32"), Error);
}

struct Bf16Case { const char* type; int64_t layers; bool bidir; };
class Bf16Grad : public ::testing::TestWithParam<Bf16Case> {};

// Gradients of every parameter tensor (each layer, each direction, the head) in bf16 within
// 2e-2 relative (max-abs error over max-abs value) of fp32's, same weights and batch.
TEST_P(Bf16Grad, EveryLayerWithinTwoPercentOfFp32) {
  SEQTRAIN_REQUIRE_BF16();
  const Bf16Case c = GetParam();
  const int64_t N = 32, T = 30, C = 8, H = 32, OUT = 2;
  ModelSpec spec{c.type, C, T, H, c.layers, c.bidir, 0.f, OUT};
  Forecaster f32(spec);
  Forecaster bf(spec, ModelEnv{.precision = resolve_precision("bf16")});
  Rng rng(21);
  f32.init(rng);
  std::memcpy(bf.params().params(), f32.params().params(), f32.params().size() * sizeof(float));
  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  Arena a1, a2;
  for (Forecaster* m : {&f32, &bf}) {
    Arena& arena = m == &f32 ? a1 : a2;
    m->params().zero_grad();
    Tensor y = ModelPass(*m, arena, true).forward(Tensor(x.data(), {N, T, C}));
    ModelPass(*m, arena, true).backward(Tensor(dy.data(), {N, OUT}));
  }
  for (size_t e = 0; e < f32.params().entries().size(); ++e) {
    Tensor g32 = f32.params().grad(e), gbf = bf.params().grad(e);
    std::vector<float> a(g32.f32(), g32.f32() + g32.numel()), b(gbf.f32(), gbf.f32() + gbf.numel());
    EXPECT_LT(rel_err(b, a), 2e-2) << f32.params().entries()[e].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, Bf16Grad,
                         ::testing::Values(Bf16Case{"lstm", 2, false}, Bf16Case{"lstm", 2, true},
                                           Bf16Case{"gru", 2, false}, Bf16Case{"gru", 2, true}),
                         [](const auto& info) {
                           return std::string(info.param.type) + "_l" + std::to_string(info.param.layers) +
                                  (info.param.bidir ? "_bi" : "_uni");
                         });

TEST(Bf16Training, ThreeHundredStepsEndWithinTwoPercentOfFp32) {
  SEQTRAIN_REQUIRE_BF16();
  const PrecisionProblem problem = PrecisionProblem::make();
  std::vector<double> l32, lbf;
  const double f32 = problem.train_300("fp32", &l32);
  const double bf = problem.train_300("bf16", &lbf);
  std::printf("[ bf16 ] mean loss of the last 50 of 300 steps: fp32 %.6f, bf16 %.6f (first step %.6f)\n", f32, bf,
              l32.front());
  EXPECT_LT(f32, 0.7 * l32.front()) << "the fp32 run should learn";
  // Mean loss over the last 50 steps (one step's loss depends on which batch it saw).
  EXPECT_LT(std::abs(bf - f32) / f32, 0.02) << "fp32 " << f32 << " bf16 " << bf;
}

}  // namespace
}  // namespace seqtrain::testing
