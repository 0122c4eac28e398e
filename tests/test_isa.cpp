// Run-time instruction-set dispatch (backend/cpu/isa.h, cpu_kernels.h): SEQTRAIN_ISA's parsing
// and cap, every kernel at every level this process may run giving the same results, and the
// CLI choosing, logging and recording the level it is told to.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include <omp.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/half_scalar.h"
#include "core/error.h"
#include "core/rng.h"
#include "test_trainer_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using namespace cli;

std::vector<Isa> runnable_levels() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(active_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

TEST(Isa, ResolveTakesTheCpuLevelOrACapBelowIt) {
  EXPECT_EQ(resolve_isa(nullptr, Isa::avx512), Isa::avx512);
  EXPECT_EQ(resolve_isa("", Isa::avx2), Isa::avx2);
  EXPECT_EQ(resolve_isa("avx2", Isa::avx512_bf16), Isa::avx2);
  EXPECT_EQ(resolve_isa("plain", Isa::avx2), Isa::plain);
  EXPECT_EQ(resolve_isa("avx512_bf16", Isa::avx512_bf16), Isa::avx512_bf16);
  for (Isa i : {Isa::plain, Isa::avx2, Isa::avx512, Isa::avx512_bf16}) EXPECT_EQ(parse_isa(isa_name(i), "x"), i);
}

TEST(Isa, UnknownOrTooHighLevelIsAClearError) {
  const std::string unknown = error_of([] { resolve_isa("avx3", Isa::avx512); });
  EXPECT_CONTAINS(unknown, "SEQTRAIN_ISA=avx3");
  EXPECT_CONTAINS(unknown, "plain, avx2, avx512, avx512_bf16");
  EXPECT_CONTAINS(unknown, "this CPU supports up to");
  const std::string high = error_of([] { resolve_isa("avx512", Isa::avx2); });
  EXPECT_CONTAINS(high, "SEQTRAIN_ISA=avx512");
  EXPECT_CONTAINS(high, "supports up to avx2");
  EXPECT_CONTAINS(high, "unset SEQTRAIN_ISA");
}

TEST(Isa, KernelsAboveTheActiveLevelAreRefused) {
  EXPECT_EQ(cpu_kernels().isa, active_isa());
  for (Isa isa : runnable_levels()) EXPECT_EQ(cpu_kernels(isa).isa, isa);
  if (active_isa() == Isa::avx512_bf16) GTEST_SKIP() << "this process runs at the top level; nothing is above it";
  const std::string e = error_of([] { cpu_kernels(Isa::avx512_bf16); });
  EXPECT_CONTAINS(e, "avx512_bf16 kernels were asked for");
  EXPECT_FALSE(cpu_has_native_bf16());
}

// Values that exercise every rounding branch: signed zeros, infinities, NaNs, fp16 and bf16
// subnormals and their underflow, ties to even, the fp16 overflow threshold, and random normals.
std::vector<float> conversion_inputs() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.f, -0.f, inf, -inf, nan, -nan, 1.f, -1.f, 65504.f, 65519.f, 65520.f, -70000.f,
                          6.1e-5f, 5.96e-8f, 2.98e-8f, 2.9e-8f, 1e-40f, -1e-45f, 3.4e38f, 1.00390625f,
                          1.01171875f, 1.0009765625f, 1.0029296875f};
  Rng rng(7);
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<float>(rng.normal()) * std::pow(10.f, static_cast<float>(i % 9 - 4)));
  return v;
}

template <class T>
std::vector<uint32_t> bits_of(const std::vector<T>& v) {
  std::vector<uint32_t> out;
  for (T x : v) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof x);
    out.push_back(b);
  }
  return out;
}

// Every level converts bit for bit like the scalar reference, for every length up to past
// two 16-lane vectors (full vectors and each tail) and the whole input.
// From the bits, not std::fpclassify: that compares against FLT_MIN in float arithmetic, which
// sees a subnormal as zero once an earlier test in the process has set DAZ on this thread.
bool is_subnormal_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0;
}

TEST(Isa, EveryLevelConvertsBitForBitLikeTheScalarReference) {
  const auto x = conversion_inputs();
  std::vector<uint16_t> bf_ref(x.size()), fp_ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bf_ref[i] = half_scalar::to_bf16(x[i]);
    fp_ref[i] = half_scalar::to_fp16(x[i]);
  }
  std::vector<float> bf_back_ref(x.size()), fp_back_ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bf_back_ref[i] = half_scalar::from_bf16(bf_ref[i]);
    fp_back_ref[i] = half_scalar::from_fp16(fp_ref[i]);
  }
  for (Isa isa : runnable_levels()) {
    const CpuKernels& k = cpu_kernels(isa);
    // AVX512-BF16's vcvtneps2bf16 always reads f32 subnormals as zero (a documented property of
    // the instruction); the compute threads run with DAZ/FTZ set anyway, so training never sees
    // the difference. Every other value converts as the reference does.
    std::vector<uint16_t> bf_want = bf_ref;
    if (isa == Isa::avx512_bf16)
      for (size_t i = 0; i < x.size(); ++i)
        if (is_subnormal_bits(x[i])) bf_want[i] = half_scalar::to_bf16(std::signbit(x[i]) ? -0.f : 0.f);
    std::vector<int64_t> lengths;
    for (int64_t n = 1; n <= 37; ++n) lengths.push_back(n);
    lengths.push_back(static_cast<int64_t>(x.size()));
    for (int64_t n : lengths) {
      std::vector<uint16_t> bf(n + 1, 0xabcd), fp(n + 1, 0xabcd);
      k.f32_to_bf16(x.data(), bf.data(), n);
      k.f32_to_fp16(x.data(), fp.data(), n);
      ASSERT_EQ(std::vector<uint16_t>(bf.begin(), bf.begin() + n), std::vector<uint16_t>(bf_want.begin(), bf_want.begin() + n))
          << isa_name(isa) << " f32_to_bf16 n=" << n;
      ASSERT_EQ(std::vector<uint16_t>(fp.begin(), fp.begin() + n), std::vector<uint16_t>(fp_ref.begin(), fp_ref.begin() + n))
          << isa_name(isa) << " f32_to_fp16 n=" << n;
      EXPECT_EQ(bf[n], 0xabcd) << isa_name(isa) << " wrote past n=" << n;
      EXPECT_EQ(fp[n], 0xabcd) << isa_name(isa) << " wrote past n=" << n;
      std::vector<float> bf_back(n), fp_back(n);
      k.bf16_to_f32(bf_ref.data(), bf_back.data(), n);
      k.fp16_to_f32(fp_ref.data(), fp_back.data(), n);
      ASSERT_EQ(bits_of(bf_back), bits_of(std::vector<float>(bf_back_ref.begin(), bf_back_ref.begin() + n)))
          << isa_name(isa) << " bf16_to_f32 n=" << n;
      ASSERT_EQ(bits_of(fp_back), bits_of(std::vector<float>(fp_back_ref.begin(), fp_back_ref.begin() + n)))
          << isa_name(isa) << " fp16_to_f32 n=" << n;
    }
  }
}

// AdamW test data: parameters, gradients and moments of a plausible step, and the scalars.
struct AdamWCase {
  std::vector<float> p, g, m, v;
  AdamWScalars s;
};
AdamWCase adamw_case(int64_t n) {
  AdamWCase c{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n), {}};
  Rng rng(3);
  for (int64_t i = 0; i < n; ++i) {
    c.p[i] = static_cast<float>(rng.normal());
    c.g[i] = static_cast<float>(rng.normal()) * 0.1f;
    c.m[i] = static_cast<float>(rng.normal()) * 0.01f;
    c.v[i] = static_cast<float>(std::fabs(rng.normal())) * 1e-3f;
  }
  c.s.decay = 0.9f; c.s.b1 = 0.9f; c.s.one_minus_b1 = 0.1f; c.s.b2 = 0.999f; c.s.one_minus_b2 = 0.001f;
  c.s.bc2_sqrt = 0.0447f; c.s.eps = 1e-8f; c.s.neg_step_size = -0.01f;
  return c;
}

// The case updated in place by `isa`'s kernel over these runs (none: one decaying run).
AdamWCase adamw_kernel(Isa isa, AdamWCase c, const std::vector<AdamWRun>& runs, bool parallel) {
  AdamWKernelArgs a;
  a.params = c.p.data(); a.grads = c.g.data(); a.m = c.m.data(); a.v = c.v.data();
  a.runs = runs.empty() ? nullptr : runs.data();
  a.n_runs = static_cast<int64_t>(runs.size());
  a.n = static_cast<int64_t>(c.p.size());
  a.s = c.s;
  a.parallel = parallel;
  cpu_kernels(isa).adamw(a);
  return c;
}

// Runs of lengths cycling through `lengths`, alternating decay, covering [0, n).
std::vector<AdamWRun> adamw_runs(int64_t n, const std::vector<int64_t>& lengths) {
  std::vector<AdamWRun> runs;
  for (int64_t b = 0, k = 0; b < n; ++k) {
    const int64_t e = std::min(n, b + lengths[k % lengths.size()]);
    runs.push_back({b, e, k % 2 == 0});
    b = e;
  }
  return runs;
}

// The AdamW update at every level equals the plain level's within 1e-6 relative, each of the
// parameters and both moments as a whole (FMA contraction on the wider levels moves last bits,
// and an element of m where m and g nearly cancel may move more), with and without decay runs.
TEST(Isa, EveryLevelUpdatesAdamWAlike) {
  const AdamWCase c = adamw_case(1037);
  for (const auto& runs : {std::vector<AdamWRun>{}, adamw_runs(1037, {1, 2})}) {
    const AdamWCase ref = adamw_kernel(Isa::plain, c, runs, false);
    EXPECT_GT(rel_err(ref.p, c.p), 1e-4) << "the update moved nothing";
    for (Isa isa : runnable_levels()) {
      const AdamWCase got = adamw_kernel(isa, c, runs, false);
      EXPECT_LT(rel_err(got.p, ref.p), 1e-6) << isa_name(isa);
      EXPECT_LT(rel_err(got.m, ref.m), 1e-6) << isa_name(isa);
      EXPECT_LT(rel_err(got.v, ref.v), 1e-6) << isa_name(isa);
    }
  }
}

// Whether this file's float code may be contracted into FMAs (a -march=native build).
#ifdef __FMA__
constexpr bool kContracts = true;
#else
constexpr bool kContracts = false;
#endif

// The kernel splits [0, n) into one vector-aligned piece per thread and walks the decay runs
// inside each. At odd sizes, with runs that start and end mid-vector (and pieces that cut runs
// in two), every thread count gives the one-thread result bit for bit at every level, and the
// plain level equals the scalar formula bit for bit (neither contracts into FMAs), each element
// with its own run's decay.
TEST(Isa, AdamWPiecesAndRunsDoNotChangeABit) {
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1037}, int64_t{40007}}) {
    const AdamWCase c = adamw_case(n);
    const std::vector<AdamWRun> runs = adamw_runs(n, {5, 1, 129, 3, 4099, 16, 33});
    AdamWCase want = c;
    for (const AdamWRun& r : runs)
      for (int64_t i = r.begin; i < r.end; ++i) {
        const float g = c.g[i];
        float p = c.p[i] * (r.decay ? c.s.decay : 1.f);
        const float mi = c.m[i] * c.s.b1 + c.s.one_minus_b1 * g;
        const float vi = c.v[i] * c.s.b2 + c.s.one_minus_b2 * g * g;
        const float denom = std::sqrt(vi) / c.s.bc2_sqrt + c.s.eps;
        p += c.s.neg_step_size * mi / denom;
        want.p[i] = p, want.m[i] = mi, want.v[i] = vi;
      }
    for (Isa isa : runnable_levels()) {
      const AdamWCase one = adamw_kernel(isa, c, runs, false);
      if (isa == Isa::plain && !kContracts) {
        EXPECT_EQ(bits_of(one.p), bits_of(want.p)) << "n=" << n;
        EXPECT_EQ(bits_of(one.m), bits_of(want.m)) << "n=" << n;
        EXPECT_EQ(bits_of(one.v), bits_of(want.v)) << "n=" << n;
      }
      EXPECT_LT(rel_err(one.p, want.p), 1e-6) << isa_name(isa) << " n=" << n;
      for (int threads : {1, 2, 3}) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        const AdamWCase got = adamw_kernel(isa, c, runs, true);
        omp_set_num_threads(saved);
        EXPECT_EQ(bits_of(got.p), bits_of(one.p)) << isa_name(isa) << " n=" << n << " threads=" << threads;
        EXPECT_EQ(bits_of(got.m), bits_of(one.m)) << isa_name(isa) << " n=" << n << " threads=" << threads;
        EXPECT_EQ(bits_of(got.v), bits_of(one.v)) << isa_name(isa) << " n=" << n << " threads=" << threads;
      }
    }
  }
}

// GELU's kernels at every level against the exact erf form in double, element by element over
// [-12, 12] (the far negative tail included, where only a relative bound means anything) and at
// a length that leaves a masked tail: forward within 2e-6 relative for |x| <= 6 and 1e-5
// beyond (kernels/fast_math.h's Phi), backward likewise relative to the size of its two terms
// (Phi and phi share one exp).
TEST(Isa, EveryLevelComputesGeluToFloatRelativeAccuracy) {
  std::vector<float> x, dy;
  for (double v = -12.0; v <= 12.0; v += 1.0 / 256) x.push_back(static_cast<float>(v));
  x.push_back(0.f), x.push_back(-0.f), x.push_back(1e-30f), x.push_back(-1e-30f);
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_NE(n % 16, 0) << "the length must leave a tail";
  Rng rng(5);
  for (int64_t i = 0; i < n; ++i) dy.push_back(static_cast<float>(rng.normal()));
  for (Isa isa : runnable_levels()) {
    std::vector<float> y(n), dx(n);
    cpu_kernels(isa).gelu_forward(x.data(), y.data(), n);
    cpu_kernels(isa).gelu_backward(x.data(), dy.data(), dx.data(), n);
    double worst_y = 0, worst_dx = 0, worst_tail = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
      const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      const double want_y = v * cdf, want_dx = dy[i] * (cdf + v * pdf);
      const double ey = want_y == 0 ? std::abs(y[i]) : std::abs(y[i] - want_y) / std::abs(want_y);
      // Relative to the terms' size: Phi + x phi crosses zero near x = -0.75.
      const double edx = std::abs(dx[i] - want_dx) / (std::abs(dy[i]) * (cdf + std::abs(v) * pdf));
      if (std::abs(v) <= 6) {
        worst_y = std::max(worst_y, ey);
        worst_dx = std::max(worst_dx, edx);
      } else {
        worst_tail = std::max({worst_tail, ey, edx});
      }
    }
    EXPECT_LT(worst_y, 2e-6) << isa_name(isa);
    EXPECT_LT(worst_dx, 2e-6) << isa_name(isa);
    EXPECT_LT(worst_tail, 1e-5) << isa_name(isa);
  }
}

// SEQTRAIN_ISA forces each level a CPU has: the run says which at start-up, records it in
// state.json, and its losses equal the other levels' within 1e-4 relative (same fused kernels,
// different vector widths and FMA contraction).
TEST(Isa, SeqtrainIsaPicksLogsAndRecordsTheLevel) {
  TempDir dir;
  const std::string args = "train " + example_config() + kSmall + " --set train.epochs=1";
  double ref = 0;
  for (int i = 0; i <= static_cast<int>(cpu_max_isa()); ++i) {
    const std::string level = isa_name(static_cast<Isa>(i));
    const std::string out = dir / level;
    Result r = run_seqtrain(args + " --out " + out, "SEQTRAIN_ISA=" + level);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_CONTAINS(r.out, "CPU kernels: " + level);
    const auto st = nlohmann::json::parse(slurp(out + "/checkpoints/last/state.json"));
    EXPECT_EQ(st["cpu_isa"], level);
    const double best = st["best_val"].get<double>();
    if (i == 0) ref = best;
    EXPECT_NEAR(best, ref, 1e-4 * std::fabs(ref)) << level;
  }
}

TEST(Isa, BadSeqtrainIsaFailsBeforeAnyWork) {
  TempDir dir;
  const std::string out = dir / "run";
  Result r = run_seqtrain("train " + example_config() + kSmall + " --out " + out, "SEQTRAIN_ISA=avx1024");
  EXPECT_EQ(r.rc, 2);
  EXPECT_CONTAINS(r.out, "SEQTRAIN_ISA=avx1024 is not an instruction-set level");
  EXPECT_CONTAINS(r.out, "plain, avx2, avx512, avx512_bf16");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace seqtrain::testing
