// ZeRO stage 1 (train.zero) pieces that need no second process: slice_of's slices tile a buffer,
// an AdamW shard updates its elements as the whole optimizer does (decay mask, groups and a
// frozen stretch included) and keeps only its slice of the moments, a whole state loads into a
// shard as its slice, and thread ranks gather the slices back into the whole state.
#include <gtest/gtest.h>

#include <thread>

#include "core/rng.h"
#include "optim/optimizer.h"
#include "thread_ranks.h"
#include "train/communicator.h"
#include "train/zero_state.h"

namespace seqtrain::testing {
namespace {

TEST(ZeroSlices, TileTheBufferOnceInRankOrder) {
  for (size_t n : {0u, 1u, 3u, 7u, 64u, 1000u})
    for (int w : {1, 2, 3, 4, 7}) {
      size_t at = 0;
      for (int r = 0; r < w; ++r) {
        const Slice s = slice_of(n, r, w);
        EXPECT_EQ(s.begin, at) << n << " over " << w << ", rank " << r;
        EXPECT_LE(s.begin, s.end);
        EXPECT_LE(s.size(), n / static_cast<size_t>(w) + 1);  // balanced
        at = s.end;
      }
      EXPECT_EQ(at, n) << n << " over " << w;
    }
}

OptimizerOptions adamw_options() {
  OptimizerOptions o;
  o.name = "adamw";
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  return o;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// A decay mask, groups with their own lr scale and a frozen stretch, over 101 elements: the
// shard boundaries of 3 ranks (33, 67) fall inside runs.
void configure(Optimizer& opt, size_t n) {
  std::vector<uint8_t> mask(n, 1);
  for (size_t i = 20; i < 50; ++i) mask[i] = 0;
  opt.set_decay_mask(mask);
  opt.set_groups({GroupRun{0, 40, 1.0, std::nullopt, false}, GroupRun{40, 60, 0.5, 0.0, false},
                  GroupRun{60, 80, 1.0, std::nullopt, true}, GroupRun{80, n, 2.0, std::nullopt, false}});
}

TEST(ZeroShard, UpdatesItsSliceAsTheWholeOptimizerAndKeepsOnlyIt) {
  const size_t n = 101;
  const int W = 3;
  auto whole = make_optimizer(adamw_options());
  configure(*whole, n);
  std::vector<float> p = random_values(n, 1);
  std::vector<std::vector<float>> pr(W, p);
  std::vector<std::unique_ptr<Optimizer>> shards;
  for (int r = 0; r < W; ++r) {
    shards.push_back(make_optimizer(adamw_options()));
    configure(*shards.back(), n);
    const Slice s = slice_of(n, r, W);
    shards.back()->set_shard(s.begin, s.end);
  }
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = random_values(n, 100 + step);
    whole->step(p.data(), g.data(), n, 1e-2);
    for (int r = 0; r < W; ++r) shards[r]->step(pr[r].data(), g.data(), n, 1e-2);
  }
  const OptimizerState all = whole->state();
  for (int r = 0; r < W; ++r) {
    const Slice s = slice_of(n, r, W);
    for (size_t i = 0; i < n; ++i) {
      if (i >= s.begin && i < s.end) {
        EXPECT_FLOAT_EQ(pr[r][i], p[i]) << "rank " << r << " element " << i;
      } else if (i < 60 || i >= 80) {
        EXPECT_NE(pr[r][i], p[i]) << "rank " << r << " updated element " << i;
      }
    }
    const OptimizerState mine = shards[r]->shard_state();
    EXPECT_EQ(mine.step, all.step);
    EXPECT_EQ(mine.param_steps, all.param_steps);
    for (const auto& [name, buf] : mine.buffers) {
      ASSERT_EQ(buf.size(), s.size()) << name;  // 1/W of the moments
      for (size_t i = 0; i < s.size(); ++i) EXPECT_FLOAT_EQ(buf[i], all.buffers.at(name)[s.begin + i]);
    }
    EXPECT_THROW(shards[r]->state(), Error) << "a shard's state() would write a partial checkpoint";
  }
  // A whole state (a checkpoint) loads into a shard as its slice and goes on as the whole does.
  auto resumed = make_optimizer(adamw_options());
  configure(*resumed, n);
  resumed->set_shard(slice_of(n, 1, W).begin, slice_of(n, 1, W).end);
  resumed->load_state(all);
  std::vector<float> q = p;
  const std::vector<float> g = random_values(n, 7);
  whole->step(p.data(), g.data(), n, 1e-2);
  resumed->step(q.data(), g.data(), n, 1e-2);
  for (size_t i = slice_of(n, 1, W).begin; i < slice_of(n, 1, W).end; ++i) EXPECT_FLOAT_EQ(q[i], p[i]);
}

TEST(ZeroShard, SgdRefusesToShard) {
  OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9;
  auto sgd = make_optimizer(o);
  EXPECT_THROW(sgd->set_shard(0, 10), Error);
}

// Ranks as threads (thread_ranks.h): the Communicator's default reduce-scatter / all-gather / gather
// (sums over the whole buffer) are what is tested here, MpiCommunicator's by tests/py/mpi_check.py.
TEST(ZeroState, GathersEveryRanksSliceOnThePrimary) {
  const size_t n = 101;
  const int W = 3;
  auto whole = make_optimizer(adamw_options());
  configure(*whole, n);
  std::vector<float> p = random_values(n, 1);
  const std::vector<float> g = random_values(n, 2);
  whole->step(p.data(), g.data(), n, 1e-2);
  const OptimizerState want = whole->state();
  ThreadGroup threads(W);
  std::vector<OptimizerState> got(W);
  std::vector<std::thread> ranks;
  for (int r = 0; r < W; ++r)
    ranks.emplace_back([&, r] {
      ThreadComm comm(threads, r);
      auto opt = make_optimizer(adamw_options());
      configure(*opt, n);
      const Slice s = slice_of(n, r, W);
      opt->set_shard(s.begin, s.end);
      opt->load_state(want);
      got[r] = whole_optimizer_state(*opt, comm, n);
    });
  for (auto& th : ranks) th.join();
  EXPECT_EQ(got[0].step, want.step);
  EXPECT_EQ(got[0].param_steps, want.param_steps);
  EXPECT_EQ(got[0].buffers, want.buffers) << "the primary holds every element, bit for bit";
  EXPECT_TRUE(got[1].buffers.empty() && got[2].buffers.empty());
}

}  // namespace
}  // namespace seqtrain::testing
