// The NCCL communicator (backend/cuda/nccl/nccl_communicator.h) on one GPU, as one rank of one: every
// collective on device buffers leaves the values the sum over one rank gives (the data itself),
// host buffers go to the host communicator, and the queued collectives order with the backend's
// other work on its stream. Skips without a GPU; several ranks run under mpirun on a machine
// with several GPUs (docs/DISTRIBUTED.md, "NCCL").
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_plugin.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "test_util.h"
#include "train/communicator.h"

namespace seqtrain::testing {
namespace {

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform() - 0.5f;
  return v;
}

TEST(CudaNccl, OneRankCollectivesOnDeviceBuffers) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  std::vector<char> id;
  try {
    id = nccl_unique_id();
  } catch (const Error& e) {
    // A plugin built without NCCL (CMake's SEQTRAIN_NCCL) says so; any other failure is one.
    if (std::string(e.what()).find("has no NCCL") == std::string::npos) throw;
    GTEST_SKIP() << e.what();
  }
  LocalCommunicator host;
  const std::unique_ptr<Communicator> comm = nccl_communicator(0, host, id);
  ASSERT_EQ(comm->world(), 1);
  const size_t n = 1000;
  const std::vector<float> x = values(n, 1);
  {
    DeviceArray<float> a(gpu, x);
    comm->all_reduce_sum(a.get(), n);
    EXPECT_EQ(a.download(), x) << "all-reduce";
    comm->reduce_scatter_sum(a.get(), n);
    EXPECT_EQ(a.download(), x) << "reduce-scatter: the one rank's slice is the whole buffer";
    comm->all_gather(a.get(), n);
    EXPECT_EQ(a.download(), x) << "all-gather";
    comm->broadcast(a.get(), n);
    EXPECT_EQ(a.download(), x) << "broadcast";
  }
  {
    // The overlap's buckets: a scale queued before each bucket's sum on the same stream.
    DeviceArray<float> a(gpu, x);
    gpu.scale(a.get(), n / 2, 2.f);
    comm->start_sum(a.get(), n / 2, SumPart{});
    gpu.scale(a.get() + n / 2, n - n / 2, 2.f);
    comm->start_sum(a.get() + n / 2, n - n / 2, SumPart{});
    comm->finish_sums();
    std::vector<float> want = x;
    for (float& v : want) v *= 2.f;
    EXPECT_EQ(a.download(), want);
  }
  {
    DeviceArray<double> d(gpu, std::vector<double>{1.5, -2.25});
    comm->all_reduce_sum(d.get(), 2);
    EXPECT_EQ(d.download(), (std::vector<double>{1.5, -2.25}));
  }
  // Host memory (counts, the optimizer state on resume) goes to the host communicator.
  std::vector<float> h = x;
  comm->all_reduce_sum(h.data(), n);
  comm->broadcast(h.data(), n);
  double count = 3;
  comm->all_reduce_sum(&count, 1);
  EXPECT_EQ(h, x);
  EXPECT_EQ(count, 3.0);
  comm->barrier();
}

}  // namespace
}  // namespace seqtrain::testing
