// The host side of a GPU run's collectives (dist/device_communicator.h), without a GPU: which
// communicator serves which backend, and NCCL's bootstrap (the primary alone makes the id, the
// host communicator carries its bytes, every rank joins with them) through a fake device entry
// in the backend registry and a fake two-rank host communicator. The NCCL communicator itself
// runs on a GPU only (test_cuda_nccl.cpp).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_plugin.h"
#include "backend/registry.h"
#include "dist/device_communicator.h"
#include "test_util.h"
#include "train/rank_start.h"

namespace seqtrain::testing {
namespace {

// Rank r of 2 whose broadcasts go through `wire`: the root writes its bytes there, the other rank
// reads them (the ranks run one after the other, the root first).
struct WireRank final : Communicator {
  WireRank(int r, std::string& w) : r_(r), wire(w) {}
  int rank() const override { return r_; }
  int world() const override { return 2; }
  void all_reduce_sum(float*, size_t) override {}
  // As if the other rank held the same values (both ranks run on the same device).
  void all_reduce_sum(double* d, size_t n) override {
    for (size_t i = 0; i < n; ++i) d[i] *= 2;
  }
  void broadcast(float*, size_t) override {}
  void broadcast_bytes(void* data, size_t bytes, int root) override {
    if (r_ == root) wire.append(static_cast<const char*>(data), bytes);
    else {
      ASSERT_GE(wire.size(), bytes);
      std::memcpy(data, wire.data(), bytes);
      wire.erase(0, bytes);
    }
  }
  void barrier() override {}
  int r_;
  std::string& wire;
};

// What the fake device's collectives were asked: ids made, and each rank's join.
struct Calls {
  int ids = 0;
  std::vector<std::vector<char>> joined;
  std::vector<int> ranks;
};
Calls g_calls;

const char* fake_device() {
  static const bool once = [] {
    BackendEntry e;
    e.name = "fakegpu";
    e.make = [](std::string_view) -> Backend& { return backend_named("reference"); };
    e.comm_id = [] {
      ++g_calls.ids;
      return std::vector<char>{'i', 'd', '\0', char(7), char(g_calls.ids)};
    };
    e.communicator = [](std::string_view, Communicator& host, const std::vector<char>& id) {
      g_calls.joined.push_back(id);
      g_calls.ranks.push_back(host.rank());
      return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>());
    };
    register_backend(e);
    return true;
  }();
  (void)once;
  return "fakegpu";
}

TEST(DeviceCommunicator, HostMemoryBackendsUseTheHostCommunicator) {
  LocalCommunicator host;
  EXPECT_EQ(dist::device_communicator(host, "cpu"), nullptr);
  EXPECT_EQ(dist::device_communicator(host, "reference"), nullptr);
}

TEST(DeviceCommunicator, ThePrimaryMakesTheIdAndEveryRankJoinsWithItsBytes) {
  g_calls = {};
  std::string wire;
  WireRank r0(0, wire), r1(1, wire);
  EXPECT_NE(dist::device_communicator(r0, fake_device()), nullptr);
  EXPECT_NE(dist::device_communicator(r1, fake_device()), nullptr);
  EXPECT_EQ(g_calls.ids, 1) << "only the primary makes an id";
  const std::vector<char> want{'i', 'd', '\0', char(7), char(1)};
  ASSERT_EQ(g_calls.joined.size(), 2u);
  EXPECT_EQ(g_calls.joined[0], want);
  EXPECT_EQ(g_calls.joined[1], want) << "rank 1 joins with rank 0's bytes (a NUL inside included)";
  EXPECT_EQ(g_calls.ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(wire.empty());
}

// Rank 0 on a GPU, rank 1 on the CPU: one agreed error on both, naming the key, before any id.
TEST(DeviceCommunicator, RanksOnDifferentDevicesAreAnAgreedError) {
  struct Mixed final : Communicator {
    int rank() const override { return 0; }
    int world() const override { return 2; }
    void all_reduce_sum(float*, size_t) override {}
    void all_reduce_sum(double*, size_t) override {}  // the other rank adds its 0
    void broadcast(float*, size_t) override {}
    void barrier() override {}
  } host;
  g_calls = {};
  EXPECT_THROW(dist::device_communicator(host, fake_device()), RankAgreedError);
  const std::string e = error_of([&] { dist::device_communicator(host, fake_device()); });
  EXPECT_CONTAINS(e, "runtime.device");
  EXPECT_CONTAINS(e, "1 of the 2 ranks");
  EXPECT_EQ(g_calls.ids, 0);
}

// NCCL asked for where no GPU is: the error names the key and the fix, before any id is made.
TEST(DeviceCommunicator, CudaWithoutAGpuNamesTheKeyAndTheFix) {
  if (cuda_availability().devices > 0) GTEST_SKIP() << "this machine has a GPU";
  LocalCommunicator host;
  const std::string e = error_of([&] { dist::device_communicator(host, "cuda:0"); });
  EXPECT_CONTAINS(e, "runtime.device");
  EXPECT_CONTAINS(e, "runtime.device: cpu");
}

}  // namespace
}  // namespace seqtrain::testing
