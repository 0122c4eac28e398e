// The overlap's buckets (train/grad_buckets.h): they cover the gradient buffer exactly once, the
// last first; a backward's reports start exactly the buckets inside the final tail, in order,
// each scaled once before it leaves; finish() starts the rest and waits.
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "nn/grad_ready.h"
#include "train/grad_buckets.h"

namespace seqtrain::testing {
namespace {

TEST(GradBuckets, CoverTheBufferExactlyOnceLastFirst) {
  for (size_t n : {1u, 2u, 5u, 100u, 1000u, 65536u, 100003u})
    for (size_t bucket : {0u, 1u, 3u, 64u, 1000u, 65536u, 200000u}) {
      const std::vector<Slice> b = gradient_buckets(n, bucket);
      ASSERT_FALSE(b.empty());
      std::vector<int> hits(n, 0);
      size_t end = n;
      for (const Slice& s : b) {
        EXPECT_EQ(s.end, end) << n << " / " << bucket << ": buckets run from the end down, adjacent";
        EXPECT_LT(s.begin, s.end);
        if (bucket > 0) {
          EXPECT_LT(s.size(), bucket + bucket / 2 + 1) << "no bucket over 1.5 x the size";
        }
        for (size_t i = s.begin; i < s.end; ++i) ++hits[i];
        end = s.begin;
      }
      EXPECT_EQ(end, 0u);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << n << " / " << bucket << ", value " << i;
      if (bucket == 0 || bucket >= n) {
        EXPECT_EQ(b.size(), 1u);
      }
    }
  EXPECT_TRUE(gradient_buckets(0, 10).empty());
}

// Records what was started, and when finish came.
struct Recorder : Communicator {
  std::vector<std::pair<size_t, size_t>> started;  // (offset, length) into `base`
  std::vector<float> seen;                          // each start's first value, as it left
  std::vector<SumPart> parts;
  const float* base = nullptr;
  int finished = 0;
  int rank() const override { return 0; }
  int world() const override { return 2; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void broadcast(float*, size_t) override {}
  void barrier() override {}
  void start_sum(float* d, size_t n, SumPart part) override {
    started.emplace_back(static_cast<size_t>(d - base), n);
    seen.push_back(d[0]);
    parts.push_back(part);
  }
  void finish_sums() override { ++finished; }
};

TEST(GradBuckets, ReportsStartTheFinalTailInOrderScaledOnce) {
  std::vector<float> g(100, 2.f);
  Recorder comm;
  comm.base = g.data();
  GradBuckets b(comm, default_backend(), g.data(), g.size(), 30, 0.5);  // buckets [70,100) [40,70) [0,40)
  ASSERT_EQ(b.count(), 3u);
  {
    const GradReadyScope scope(&b);
    grads_final_from(80);  // inside the last bucket: nothing complete yet
    EXPECT_TRUE(comm.started.empty());
    grads_final_from(70);
    grads_final_from(45);  // [70, 100) done; [40, 70) not yet
  }
  grads_final_from(0);  // no scope: ignored
  EXPECT_EQ(comm.started, (std::vector<std::pair<size_t, size_t>>{{70, 30}}));
  b.finish();
  EXPECT_EQ(comm.started, (std::vector<std::pair<size_t, size_t>>{{70, 30}, {40, 30}, {0, 40}}));
  EXPECT_EQ(comm.finished, 1);
  EXPECT_EQ(comm.seen, std::vector<float>(3, 1.f)) << "each bucket scaled just before it left";
  for (float x : g) EXPECT_EQ(x, 1.f) << "and only once";
  for (const auto& p : comm.parts) EXPECT_FALSE(p.scatter) << "an all-reduce's buckets";
}

// train.zero's buckets: each says where it sits in the whole buffer, so the communicator can cut
// it at the ranks' slices of that buffer (the reduce-scatter, bucket by bucket).
TEST(GradBuckets, ZeroBucketsAreScattersOfTheWholeBuffer) {
  std::vector<float> g(100, 2.f);
  Recorder comm;
  comm.base = g.data();
  GradBuckets b(comm, default_backend(), g.data(), g.size(), 30, 1.0, /*scatter=*/true);
  b.finish();
  ASSERT_EQ(comm.parts.size(), 3u);
  for (size_t i = 0; i < comm.parts.size(); ++i) {
    EXPECT_TRUE(comm.parts[i].scatter);
    EXPECT_EQ(comm.parts[i].offset, comm.started[i].first);
    EXPECT_EQ(comm.parts[i].whole, 100u);
  }
}

}  // namespace
}  // namespace seqtrain::testing
