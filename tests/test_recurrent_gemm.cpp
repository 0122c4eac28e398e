// RecurrentGemm (backend/cpu/recurrent_gemm.h): the RNN per-step GEMM on W_hh packed once per
// pass. Checked against a double-precision loop for both directions of the product, padded
// strides and accumulation, that a second prepare() picks up changed weights (stale packed
// weights would silently train on last step's W_hh), bf16 mode, and bad shapes; and the fused
// RNN kernels giving the same outputs and gradients with it as with plain gemm() (the path
// bench_recurrent_gemm compares against), and their bias gradients not depending on the thread
// count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/recurrent_gemm.h"
#include "backend/cpu/rnn_fused.h"
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

// One layer direction run twice on the same inputs, through gemm() and through RecurrentGemm.
struct FusedRun {
  std::vector<float> out, gates, extra, scratch, dx, dw_ih, dw_hh, db_ih, db_hh, dgi, dgh, dh, dc;
};

// chunk: FusedRnnGrads::chunk (0: the whole sequence); bf16: the 16-bit mode, with the fp32
// gate gradients kept for one step as RnnStack keeps them.
FusedRun run_fused(RnnCell cell, bool reverse, bool rec, int64_t T, int64_t N, int64_t C, int64_t H, uint64_t seed,
                   int64_t chunk = 0, bool bf16 = false, int backward_threads = 0,
                   const CpuKernels* kernels = nullptr) {
  Rng rng(seed);
  const int64_t G = rnn_gates(cell) * H;
  auto scaled = [&](size_t n) {
    auto v = normals(rng, n);
    for (auto& x : v) x *= 0.3f;
    return v;
  };
  auto w_ih = scaled(G * C), w_hh = scaled(G * H), b_ih = scaled(G), b_hh = scaled(G), x = scaled(T * N * C);
  auto dout = scaled(T * N * H);
  FusedRun r;
  r.out.assign(T * N * H, 0.f); r.gates.assign(T * N * G, 0.f); r.extra.assign(T * N * H, 0.f);
  r.scratch.assign(N * G, 0.f); r.dx.assign(T * N * C, 0.f); r.dw_ih.assign(G * C, 0.f);
  r.dw_hh.assign(G * H, 0.f); r.db_ih.assign(G, 0.f); r.db_hh.assign(G, 0.f); r.dgi.assign(T * N * G, 0.f);
  r.dgh.assign(T * N * G, 0.f); r.dh.assign(N * H, 0.f); r.dc.assign(N * H, 0.f);
  RecurrentGemm fwd, bwd;
  FusedRnnArgs a;
  a.cell = cell; a.reverse = reverse; a.T = T; a.N = N; a.C = C; a.H = H;
  a.w_ih = w_ih.data(); a.w_hh = w_hh.data(); a.b_ih = b_ih.data(); a.b_hh = b_hh.data(); a.x = x.data();
  a.out = r.out.data(); a.ld_out = H; a.gates = r.gates.data(); a.extra = r.extra.data(); a.scratch = r.scratch.data();
  a.rec = rec ? &fwd : nullptr;
  a.kernels = kernels;
  std::vector<uint16_t> w_ih_bf(w_ih.size()), w_hh_bf(w_hh.size()), x_bf(x.size()), h_bf(T * N * H),
      dgi_bf(T * N * G), dgh_bf(T * N * G);
  if (bf16) {
    f32_to_bf16(w_ih.data(), w_ih_bf.data(), w_ih.size());
    f32_to_bf16(w_hh.data(), w_hh_bf.data(), w_hh.size());
    f32_to_bf16(x.data(), x_bf.data(), x.size());
    a.w_ih_bf = w_ih_bf.data(); a.w_hh_bf = w_hh_bf.data(); a.x_bf = x_bf.data(); a.h_bf = h_bf.data();
  }
  fused_rnn_forward(a);
  const int forward_threads = omp_get_max_threads();
  if (backward_threads > 0) omp_set_num_threads(backward_threads);
  FusedRnnGrads g;
  g.dout = dout.data(); g.dx = r.dx.data(); g.dw_ih = r.dw_ih.data(); g.dw_hh = r.dw_hh.data();
  g.db_ih = r.db_ih.data(); g.db_hh = r.db_hh.data(); g.dgi = r.dgi.data();
  g.dgh = cell == RnnCell::lstm ? r.dgi.data() : r.dgh.data(); g.dh = r.dh.data(); g.dc = r.dc.data();
  std::vector<float> partials(fused_rnn_bias_partials(N, cell, H));
  g.bias_partials = partials.data();
  std::vector<float> wgrad_scratch(G * (C + H));
  g.wgrad_scratch = wgrad_scratch.data();
  g.rec = rec ? &bwd : nullptr;
  g.chunk = chunk;
  if (bf16) {
    g.dg_step_only = true;
    g.dgi_bf = dgi_bf.data(); g.dgh_bf = dgh_bf.data();
  }
  fused_rnn_backward(a, g);
  omp_set_num_threads(forward_threads);
  return r;
}

TEST(RecurrentGemm, FusedKernelsGiveTheSameOutputsAndGradientsAsWithPlainGemm) {
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
    for (bool reverse : {false, true}) {
      const auto plain = run_fused(cell, reverse, false, 9, 5, 6, 12, 17);
      const auto packed = run_fused(cell, reverse, true, 9, 5, 6, 12, 17);
      const std::string what = std::string(cell == RnnCell::lstm ? "lstm" : "gru") + (reverse ? " reverse" : "");
      EXPECT_LT(rel_err(packed.out, plain.out), 1e-5) << what;
      EXPECT_LT(rel_err(packed.extra, plain.extra), 1e-5) << what;
      EXPECT_LT(rel_err(packed.dx, plain.dx), 1e-5) << what;
      EXPECT_LT(rel_err(packed.dw_ih, plain.dw_ih), 1e-5) << what;
      EXPECT_LT(rel_err(packed.dw_hh, plain.dw_hh), 1e-5) << what;
      EXPECT_LT(rel_err(packed.db_ih, plain.db_ih), 1e-5) << what;
      EXPECT_LT(rel_err(packed.db_hh, plain.db_hh), 1e-5) << what;
      // Not trivially equal: the recurrence did contribute (W_hh's gradient is not zero).
      EXPECT_GT(*std::max_element(packed.dw_hh.begin(), packed.dw_hh.end()), 1e-4f) << what;
    }
}

// The backward runs dW_ih, dW_hh and dx chunk by chunk as its loop completes them; where the
// chunks fall (1 step, 3 steps with a short last chunk of 1, the whole sequence) must not change
// the gradients, in fp32 and bf16, either cell and direction (the first and last steps, which
// have no h_prev pair for dW_hh, fall inside different chunks).
TEST(FusedRnn, ChunkedWeightGradientsEqualTheWholeSequences) {
  for (bool bf16 : {false, true}) {
    if (bf16 && !cpu_has_native_bf16()) {
      std::printf("FusedRnn.ChunkedWeightGradientsEqualTheWholeSequences: bf16 part skipped, no AVX512-BF16 (%s)\n",
                  isa_summary().c_str());
      continue;
    }
    for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
      for (bool reverse : {false, true}) {
        const auto whole = run_fused(cell, reverse, true, 10, 9, 6, 12, 31, 0, bf16);
        for (int64_t chunk : {1, 3}) {
          const auto part = run_fused(cell, reverse, true, 10, 9, 6, 12, 31, chunk, bf16);
          const std::string what = std::string(cell == RnnCell::lstm ? "lstm" : "gru") + (reverse ? " reverse" : "") +
                                   (bf16 ? " bf16" : " fp32") + " chunk " + std::to_string(chunk);
          EXPECT_LT(rel_err(part.dw_ih, whole.dw_ih), 1e-5) << what;
          EXPECT_LT(rel_err(part.dw_hh, whole.dw_hh), 1e-5) << what;
          EXPECT_LT(rel_err(part.dx, whole.dx), 1e-5) << what;
          EXPECT_EQ(part.db_ih, whole.db_ih) << what;
          EXPECT_GT(*std::max_element(part.dw_hh.begin(), part.dw_hh.end()), 1e-4f) << what;
        }
      }
  }
}

// The gate passes at every ISA level this process may run (FusedRnnArgs::kernels) give the
// plain level's outputs and gradients within 1e-5 relative, fp32 and (where the CPU has it)
// bf16, both cells and directions; H = 37 leaves a tail at every vector width.
TEST(FusedRnn, EveryIsaLevelGivesTheSameOutputsAndGradients) {
  for (bool bf16 : {false, true}) {
    if (bf16 && !cpu_has_native_bf16()) {
      std::printf("FusedRnn.EveryIsaLevelGivesTheSameOutputsAndGradients: bf16 part skipped, no AVX512-BF16 (%s)\n",
                  isa_summary().c_str());
      continue;
    }
    for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
      for (bool reverse : {false, true}) {
        const auto ref = run_fused(cell, reverse, true, 6, 5, 7, 37, 23, 0, bf16, 0, &cpu_kernels(Isa::plain));
        for (int level = 1; level <= static_cast<int>(active_isa()); ++level) {
          const Isa isa = static_cast<Isa>(level);
          const auto got = run_fused(cell, reverse, true, 6, 5, 7, 37, 23, 0, bf16, 0, &cpu_kernels(isa));
          const std::string what = std::string(isa_name(isa)) + (cell == RnnCell::lstm ? " lstm" : " gru") +
                                   (reverse ? " reverse" : "") + (bf16 ? " bf16" : " fp32");
          EXPECT_LT(rel_err(got.out, ref.out), 1e-5) << what;
          EXPECT_LT(rel_err(got.extra, ref.extra), 1e-5) << what;
          EXPECT_LT(rel_err(got.dx, ref.dx), 1e-5) << what;
          EXPECT_LT(rel_err(got.dw_ih, ref.dw_ih), 1e-5) << what;
          EXPECT_LT(rel_err(got.dw_hh, ref.dw_hh), 1e-5) << what;
          EXPECT_LT(rel_err(got.db_ih, ref.db_ih), 1e-5) << what;
          EXPECT_LT(rel_err(got.db_hh, ref.db_hh), 1e-5) << what;
          EXPECT_GT(*std::max_element(got.dw_hh.begin(), got.dw_hh.end()), 1e-4f) << what;
        }
      }
  }
}

// The fused backward sums the bias gradients in fixed blocks of rows added in block order, so
// they are bitwise the same for any thread count of the backward. The forward runs on one
// thread every time: its input-projection GEMM may block by thread count (oneDNN's AVX2 sgemm
// does at this shape), which would change the gates themselves. T = 1 keeps the recurrent GEMM
// out of the gate gradients; N * H = 8576 is enough for the gate pass to run threaded, and
// N = 67 ends in a partial block.
TEST(FusedRnn, BiasGradientsAreBitwiseTheSameForAnyThreadCount) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru}) {
    const auto one = run_fused(cell, false, false, 1, 67, 6, 128, 5, 0, false, 1);
    for (int threads : {2, 3}) {
      const auto many = run_fused(cell, false, false, 1, 67, 6, 128, 5, 0, false, threads);
      EXPECT_EQ(many.db_ih, one.db_ih) << threads << " threads";
      EXPECT_EQ(many.db_hh, one.db_hh) << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace seqtrain::testing
