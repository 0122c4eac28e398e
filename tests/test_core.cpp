// Core: the arena's no-allocation steady state, the RNG's documented stream, tensor views.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/recurrent_gemm.h"
#include "core/arena.h"
#include "core/rng.h"
#include "models/forecaster.h"
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
  // steps (forward and backward, per layer and direction) and make none later.
  const size_t prims = RecurrentGemm::primitives_created();
  EXPECT_GE(prims, prims0 + 8);  // 2 layers x 2 directions x forward and backward
  for (int i = 0; i < 5; ++i) step.run(Tensor(x.data(), {N, T, C}), Tensor(y.data(), {N, 2}), 10 + i);
  EXPECT_EQ(Arena::os_allocations(), before);
  EXPECT_EQ(RecurrentGemm::primitives_created(), prims);
  EXPECT_EQ(step.arena().capacity(), cap);
  EXPECT_GT(step.arena().high_water(), 0u);
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
