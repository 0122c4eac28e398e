// Core: the arena's no-allocation steady state (the LSTM forecaster and the GPT through
// TrainStep), the RNG's documented stream, tensor views.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>
#include <cmath>
#include <string>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/recurrent_gemm.h"
#include "core/arena.h"
#include "core/parallel_each.h"
#include "core/rng.h"
#include "models/forecaster.h"
#include "models/gpt.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace seqtrain {
namespace {

TEST(CoreArena, SteadyStateTrainingStepAllocatesNothing) {
  const int64_t N = 16, T = 20, C = 3;
  Forecaster model(ModelSpec{"lstm", C, T, 32, 2, true, 0.2f, 2});
  Rng rng(1);
  model.init(rng);
  auto opt = make_optimizer(OptimizerOptions{});
  auto sched = make_schedule(ScheduleOptions{});
  TrainStep step(model, *opt, *sched, StepOptions{LossKind::mse, {}, 1.0, 1});
  std::vector<float> x(N * T * C), y(N * 2);
  for (auto& v : x) v = rng.normal();
  for (auto& v : y) v = rng.normal();
  const size_t prims0 = RecurrentGemm::primitives_created();
  for (int i = 0; i < 2; ++i) step.run(Tensor(x.data(), {N, T, C}), Tensor(y.data(), {N, 2}), i);
  const uint64_t before = Arena::os_allocations();
  const size_t cap = step.arena().capacity();
  // The fused layers' recurrent GEMMs made their primitives and packed weights in the first
  // steps (forward and backward, per layer and direction) and make none later. Below AVX-512 the
  // fp32 LSTM runs them on the plain sgemm and makes none at all (cpu_rnn.h, packed_forward).
  const size_t prims = RecurrentGemm::primitives_created();
  if (active_isa() >= Isa::avx512) EXPECT_GE(prims, prims0 + 8);  // 2 layers x 2 directions x fwd and bwd
  else EXPECT_EQ(prims, prims0);
  for (int i = 0; i < 5; ++i) step.run(Tensor(x.data(), {N, T, C}), Tensor(y.data(), {N, 2}), 10 + i);
  EXPECT_EQ(Arena::os_allocations(), before);
  EXPECT_EQ(RecurrentGemm::primitives_created(), prims);
  EXPECT_EQ(step.arena().capacity(), cap);
  EXPECT_GT(step.arena().high_water(), 0u);
}

// The GPT through TrainStep: after two steps, further steps make no arena allocation — the
// step's arena, gradient checkpointing's recompute arena and the attention kernels' per-thread
// workspaces (arenas too, backend/cpu/cpu_backend.cpp) — with dropout on, T over one attention
// tile, plain and checkpointed, fp32 and (on a CPU with native bf16) bf16 attention.
TEST(CoreArena, GptSteadyStateTrainingStepAllocatesNothing) {
  const int64_t V = 11, B = 3, T = 70;
  for (const char* precision : {"fp32", "bf16"}) {
    if (std::string(precision) == "bf16" && !cpu_has_native_bf16()) continue;
    for (bool ckpt : {false, true}) {
      ModelSpec spec;
      spec.type = "gpt";
      spec.vocab_size = V; spec.lookback = T; spec.output_size = T;
      spec.layers = 2; spec.heads = 2; spec.hidden = 32;
      spec.dropout = 0.1f;
      spec.grad_checkpoint = ckpt;
      Gpt model(spec, ModelEnv{.precision = resolve_precision(precision)});
      Rng rng(2);
      model.init(rng);
      auto opt = make_optimizer(OptimizerOptions{});
      auto sched = make_schedule(ScheduleOptions{});
      TrainStep step(model, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
      std::vector<int64_t> x(B * T), y(B * T);
      for (auto& v : x) v = static_cast<int64_t>(rng.below(V));
      for (auto& v : y) v = static_cast<int64_t>(rng.below(V));
      auto run = [&](uint64_t seed) {
        step.run(Tensor(x.data(), {B, T}, DType::i64), Tensor(y.data(), {B, T}, DType::i64), seed);
      };
      for (int i = 0; i < 2; ++i) run(i);
      const uint64_t before = Arena::os_allocations();
      const size_t cap = step.arena().capacity();
      for (int i = 0; i < 5; ++i) run(10 + i);
      EXPECT_EQ(Arena::os_allocations(), before) << precision << (ckpt ? " checkpointed" : "");
      EXPECT_EQ(step.arena().capacity(), cap);
      EXPECT_TRUE(std::isfinite(step.take_loss()));
    }
  }
}

TEST(CoreArena, GrowsIntoOneChunkAfterReset) {
  Arena a;
  a.alloc(3 << 20);
  a.alloc(3 << 20);  // overflows into a second chunk
  a.reset();
  const uint64_t before = Arena::os_allocations();
  a.alloc(3 << 20);
  a.alloc(3 << 20);
  EXPECT_EQ(Arena::os_allocations(), before);
  EXPECT_GE(a.capacity(), size_t{6} << 20);
}

TEST(CoreArena, PrefaultMergesAndClearsWithoutAllocatingNextCycle) {
  Arena a;
  float* p = static_cast<float*>(a.alloc(3 << 20));
  p[0] = 7.f;
  a.alloc(3 << 20);
  a.prefault();
  EXPECT_EQ(a.used(), 0u);
  const uint64_t before = Arena::os_allocations();
  float* q = static_cast<float*>(a.alloc(6 << 20));
  EXPECT_EQ(Arena::os_allocations(), before) << "one merged chunk holds the whole cycle";
  EXPECT_EQ(q[0], 0.f) << "every byte was written";
  EXPECT_EQ(q[(6 << 20) / sizeof(float) - 1], 0.f);
}

TEST(CoreParallelEach, RunsEveryIndexOnceAndRethrowsTheFirstFailureInIndexOrder) {
  std::vector<std::atomic<int>> runs(1000);
  parallel_each(runs.size(), [&](size_t i) { ++runs[i]; });
  for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "index " << i;
  // Two indices fail, on whichever threads take them: the lower index's error is the one seen.
  try {
    parallel_each(1000, [&](size_t i) {
      if (i == 900 || i == 7) throw std::runtime_error("index " + std::to_string(i));
    });
    FAIL() << "parallel_each swallowed the errors";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 7");
  }
  parallel_each(0, [](size_t) { FAIL() << "no index to run"; });
}

TEST(CoreRng, StreamIsFixedAndDocumented) {
  // The stream is part of the checkpoint contract: these values must never change silently.
  Rng a(42, 0), b(42, 0), c(42, 1);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 4; ++i) { va.push_back(a.next_u64()); vb.push_back(b.next_u64()); vc.push_back(c.next_u64()); }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  // Moments of uniform and normal draws.
  Rng r(7);
  double su = 0, sn = 0, sn2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float u = r.uniform();
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    su += u;
    double z = r.normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.01);
}

TEST(CoreRng, ZigguratNormalsFollowTheNormalDistribution) {
  // Kolmogorov-Smirnov distance to the normal CDF over 400k draws (the 0.1% critical value is
  // 1.95 / sqrt(n) = 0.0031), the first four moments, and both tails beyond the ziggurat's base
  // edge r = 3.44, which are drawn by a separate path.
  const int n = 400000;
  std::vector<float> z(n, 0.f);
  Rng r(11);
  r.add_normal(z.data(), n, 1.f);
  double m1 = 0, m2 = 0, m4 = 0;
  int beyond3 = 0, above_r = 0, below_r = 0;
  for (float v : z) {
    ASSERT_TRUE(std::isfinite(v));
    m1 += v; m2 += double(v) * v; m4 += double(v) * v * v * v;
    beyond3 += std::abs(v) > 3.f;
    above_r += v > 3.5f;
    below_r += v < -3.5f;
  }
  EXPECT_NEAR(m1 / n, 0.0, 0.006);
  EXPECT_NEAR(m2 / n, 1.0, 0.01);
  EXPECT_NEAR(m4 / n, 3.0, 0.06);
  EXPECT_NEAR(beyond3 / double(n), 0.0026998, 0.0004);  // 2 * (1 - Phi(3))
  const double tail35 = 0.00023263 * n;                 // 1 - Phi(3.5), per side
  EXPECT_NEAR(above_r, tail35, 5 * std::sqrt(tail35));
  EXPECT_NEAR(below_r, tail35, 5 * std::sqrt(tail35));
  std::sort(z.begin(), z.end());
  double ks = 0;
  for (int i = 0; i < n; ++i) {
    const double cdf = 0.5 * std::erfc(-z[i] / std::sqrt(2.0));
    ks = std::max({ks, std::abs(cdf - double(i) / n), std::abs(cdf - double(i + 1) / n)});
  }
  EXPECT_LT(ks, 0.0031);
}

TEST(CoreRng, AddNormalIsAReproducibleScaledStream) {
  std::vector<float> a(1000, 1.f), b(1000, 1.f), c(1000, 0.f);
  Rng ra(5), rb(5), rc(5);
  ra.add_normal(a.data(), 600, 0.5f);
  ra.add_normal(a.data() + 600, 400, 0.5f);  // in pieces: the same stream as one call
  rb.add_normal(b.data(), 1000, 0.5f);
  rc.add_normal(c.data(), 1000, 1.f);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_FLOAT_EQ(a[i], 1.f + 0.5f * c[i]);  // adds scale * z to what was there
  }
}

TEST(CoreRng, StateRoundTripContinuesExactly) {
  Rng a(3);
  for (int i = 0; i < 7; ++i) a.normal();  // leaves a cached Box-Muller spare
  Rng b;
  b.set_state(a.state());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.normal(), b.normal());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.below(1000), b.below(1000));
}

TEST(CoreTensor, ViewsAndErrors) {
  std::vector<float> buf(24);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i);
  Tensor t(buf.data(), {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  Tensor s = t.slice0(1, 2);
  EXPECT_EQ(s.f32()[0], 12.f);
  EXPECT_EQ(t.reshape({6, 4}).shape, (Shape{6, 4}));
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.slice0(1, 3), Error);
  Tensor d(buf.data(), {2}, DType::bf16);
  EXPECT_THROW(d.f32(), Error);
}

}  // namespace
}  // namespace seqtrain
