// RecurrentGemm (backend/cpu/recurrent_gemm.h): the RNN per-step GEMM on W_hh packed once per
// pass. Checked against a double-precision loop for both directions of the product, padded
// strides and accumulation, that a second prepare() picks up changed weights (stale packed
// weights would silently train on last step's W_hh), bf16 mode, and bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/recurrent_gemm.h"
#include "core/error.h"
#include "core/rng.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using Op = RecurrentGemm::Op;

std::vector<float> normals(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal();
  return v;
}

// C[M, cols] (+)= A x W^T (forward, W [G, H]) or A x W (backward), in double, on C's stride.
std::vector<double> reference(const RecurrentGemm::Shape& s, const std::vector<float>& A, const std::vector<float>& W,
                              const std::vector<float>& C0) {
  const bool fwd = s.op == Op::forward;
  const int64_t K = fwd ? s.H : s.G, N = fwd ? s.G : s.H;
  std::vector<double> C(C0.begin(), C0.end());
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = s.accumulate ? C[i * s.ldc + j] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[i * s.lda + k]) * W[fwd ? j * s.H + k : k * s.H + j];
      C[i * s.ldc + j] = acc;
    }
  return C;
}

// Only the [M, cols] block, not the padding.
template <class T>
std::vector<double> block(const RecurrentGemm::Shape& s, const std::vector<T>& C) {
  const int64_t N = s.op == Op::forward ? s.G : s.H;
  std::vector<double> out;
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < N; ++j) out.push_back(C[i * s.ldc + j]);
  return out;
}

TEST(RecurrentGemm, MatchesDoubleLoopForBothOpsStridesAndAccumulateAndRepacksChangedWeights) {
  Rng rng(11);
  const int64_t M = 7, H = 24, G = 3 * H;
  RecurrentGemm rg;
  for (Op op : {Op::forward, Op::backward})
    for (bool acc : {false, true}) {
      const bool fwd = op == Op::forward;
      const RecurrentGemm::Shape s{op, false, acc, M, G, H, (fwd ? H : G) + 5, (fwd ? G : H) + 3};
      for (int pass = 0; pass < 2; ++pass) {
        // A new W_hh each pass, as after an optimizer step; several steps per pass.
        auto W = normals(rng, G * H);
        rg.prepare(s, W.data());
        for (int step = 0; step < 3; ++step) {
          auto A = normals(rng, M * s.lda), C = normals(rng, M * s.ldc);
          const auto want = reference(s, A, W, C);
          const auto before = C;
          rg.run(A.data(), C.data());
          EXPECT_LT(rel_err(block(s, C), block(s, want)), 1e-5)
              << "fwd=" << fwd << " acc=" << acc << " pass=" << pass << " step=" << step;
          const int64_t cols = fwd ? G : H;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = cols; j < s.ldc; ++j) EXPECT_EQ(C[i * s.ldc + j], before[i * s.ldc + j]) << "padding";
        }
      }
    }
}

TEST(RecurrentGemm, KeepsOnePrimitivePerShape) {
  Rng rng(2);
  const int64_t H = 16, G = 4 * H;
  auto W = normals(rng, G * H);
  RecurrentGemm rg;
  const size_t before = RecurrentGemm::primitives_created();
  const RecurrentGemm::Shape a{Op::forward, false, true, 4, G, H, H, G}, b{Op::forward, false, true, 3, G, H, H, G};
  for (int i = 0; i < 3; ++i) {
    rg.prepare(a, W.data());
    rg.prepare(b, W.data());  // a last partial batch alternating with full ones
  }
  EXPECT_EQ(RecurrentGemm::primitives_created(), before + 2);
}

TEST(RecurrentGemm, Bf16MatchesDoubleLoopOnBf16RoundedInputs) {
  if (!cpu_has_native_bf16()) GTEST_SKIP() << "CPU has no AVX512-BF16";
  Rng rng(5);
  const int64_t M = 9, H = 32, G = 4 * H;
  RecurrentGemm rg;
  for (Op op : {Op::forward, Op::backward})
    for (bool acc : {false, true}) {
      const bool fwd = op == Op::forward;
      const RecurrentGemm::Shape s{op, true, acc, M, G, H, fwd ? H : G, fwd ? G : H};
      // Inputs exactly representable in bf16, so the only difference is summation order.
      auto round = [](std::vector<float> v) {
        std::vector<uint16_t> b(v.size());
        f32_to_bf16(v.data(), b.data(), v.size());
        for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32(b[i]);
        return v;
      };
      auto W = round(normals(rng, G * H)), A = round(normals(rng, M * s.lda)), C = normals(rng, M * s.ldc);
      std::vector<uint16_t> Ab(A.size());
      f32_to_bf16(A.data(), Ab.data(), A.size());
      const auto want = reference(s, A, W, C);
      rg.prepare(s, W.data());
      rg.run(Ab.data(), C.data());
      EXPECT_LT(rel_err(block(s, C), block(s, want)), 1e-5) << "fwd=" << fwd << " acc=" << acc;
    }
}

TEST(RecurrentGemm, BadShapeOrRunBeforePrepareThrows) {
  std::vector<float> W(64 * 16), A(64), C(64);
  RecurrentGemm rg;
  EXPECT_THROW(rg.run(A.data(), C.data()), Error);
  // lda smaller than the reduced dimension (H = 16 in forward).
  EXPECT_THROW(rg.prepare(RecurrentGemm::Shape{Op::forward, false, false, 2, 64, 16, 8, 64}, W.data()), Error);
  EXPECT_THROW(rg.prepare(RecurrentGemm::Shape{Op::backward, false, false, 0, 64, 16, 64, 16}, W.data()), Error);
}

}  // namespace
}  // namespace seqtrain::testing
