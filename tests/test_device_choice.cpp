// runtime.device (auto | cpu | cuda | cuda:N) and the CUDA plugin's availability as a GPU-less
// machine sees them: parsing, the backend each choice resolves to, and the load-time error a run
// that asks for a GPU gets when none can be used (before anything is written).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"
#include "config/config.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::error_of;

TEST(DeviceChoice, ParsesEveryFormAndNamesTheKeyOnAMalformedOne) {
  EXPECT_EQ(resolve_device("cpu"), -1);
  EXPECT_EQ(resolve_device("cuda"), 0);
  EXPECT_EQ(resolve_device("cuda:3"), 3);
  EXPECT_EQ(resolve_device("auto"), cuda_availability().devices > 0 ? 0 : -1);
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", "cuda:12345"}) {
    const std::string e = error_of([&] { resolve_device(bad); });
    EXPECT_CONTAINS(e, "runtime.device");
    EXPECT_CONTAINS(e, "cuda:N");
  }
}

// Under mpirun, cuda is the GPU of the process's local rank (one process per GPU); a local rank
// beyond the machine's GPUs is an error naming the key and the fix.
TEST(DeviceChoice, CudaIsTheLocalRanksGpuUnderALauncher) {
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  const int gpus = cuda_availability().devices;
  if (gpus >= 2) {
    EXPECT_EQ(resolve_device("cuda"), 1);
    EXPECT_EQ(resolve_device("auto"), 1);
  } else {
    const std::string e = error_of([&] { resolve_device("cuda"); });
    EXPECT_CONTAINS(e, "runtime.device");
    EXPECT_CONTAINS(e, "one process per GPU");
  }
  EXPECT_EQ(resolve_device("cuda:0"), 0) << "an explicit GPU is taken as given";
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(resolve_device("cuda"), 0);
}

TEST(DeviceChoice, ResolvesToABackendName) {
  EXPECT_EQ(backend_for("cpu", "cpu"), "cpu");
  EXPECT_EQ(backend_for("cpu", "cuda:1"), "cuda:1");
  EXPECT_EQ(backend_for("cpu", "auto"), cuda_availability().devices > 0 ? "cuda:0" : "cpu");
  EXPECT_EQ(backend_for("reference", "auto"), "reference");
  const std::string e = error_of([] { backend_for("reference", "cuda"); });
  EXPECT_CONTAINS(e, "runtime.device");
  EXPECT_CONTAINS(e, "runtime.backend");
}

TEST(DeviceChoice, ConfigDefaultsToAutoAndListsTheChoices) {
  EXPECT_EQ(load_config("").runtime.device, "auto");
  EXPECT_EQ(load_config("", {"runtime.device=cpu"}).runtime.device, "cpu");
  const std::string e = error_of([] { load_config("", {"runtime.device=gpu"}); });
  EXPECT_CONTAINS(e, "runtime.device");
  EXPECT_CONTAINS(e, "cuda:0");
}

// On a machine whose CUDA runtime sees no GPU (this one, CI), asking for one is a load error
// naming the key, the runtime's reason and the fix; a run never starts, so nothing is written.
TEST(DeviceChoice, AGpuAskedForWithoutOneIsALoadErrorWithTheFix) {
  if (cuda_availability().devices > 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_FALSE(cuda_availability().why_none.empty());
  for (const char* d : {"cuda", "cuda:1"}) {
    const std::string e = error_of([&] { load_config("", {std::string("runtime.device=") + d}); });
    EXPECT_CONTAINS(e, "runtime.device");
    EXPECT_CONTAINS(e, cuda_availability().why_none);
    EXPECT_CONTAINS(e, "runtime.device: cpu");
  }
  EXPECT_CONTAINS(error_of([] { backend_named("cuda:0"); }), "no GPU can be used");
  EXPECT_CONTAINS(error_of([] { backend_named("vulkan"); }), "runtime.backend 'vulkan' is not known");
}

TEST(DeviceChoice, TheCliRefusesAGpuRunBeforeWritingAnything) {
  if (cuda_availability().devices > 0) GTEST_SKIP() << "this machine has a GPU";
  testing::TempDir dir;
  const std::string run = dir / "run";
  const int rc = testing::run_command(testing::seqtrain_binary() + " train " + testing::source_dir() +
                                      "/examples/forecast.yaml --set runtime.device=cuda --out " + run + " > " +
                                      (dir / "log") + " 2>&1");
  EXPECT_NE(rc, 0);
  EXPECT_FALSE(std::filesystem::exists(run));
}

}  // namespace
}  // namespace seqtrain
