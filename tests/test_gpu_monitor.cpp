// GpuMonitor (backend/gpu_monitor.h) without a GPU: NVML missing or not NVML is a reason, never a
// crash; and, against a stand-in NVML library compiled here (the driver's C ABI, fixed answers),
// the sample carries the driver's numbers in the monitor's units.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/gpu_monitor.h"
#include "test_util.h"

namespace seqtrain {
namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

TEST(GpuMonitor, AMissingLibraryIsAReason) {
  ScopedEnv env("SEQTRAIN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  GpuMonitor m(0);
  EXPECT_FALSE(m.available());
  EXPECT_CONTAINS(m.why_unavailable(), "/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(m.sample().has_value());
}

TEST(GpuMonitor, ALibraryThatIsNotNvmlIsAReason) {
  ScopedEnv env("SEQTRAIN_NVML_LIBRARY", "libm.so.6");
  GpuMonitor m(0);
  EXPECT_FALSE(m.available());
  EXPECT_CONTAINS(m.why_unavailable(), "nvmlInit_v2");
  EXPECT_FALSE(m.sample().has_value());
}

// The stand-in: one GPU at 73% busy, 1 GiB of 80 GiB used, 250 W.
const char* kFakeNvml = R"(
extern "C" {
struct U { unsigned gpu, memory; };
struct M { unsigned long long total, free, used; };
static int g_dev = 1;
int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int) { return "Invalid Argument"; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { if (i != 0) return 2; *d = &g_dev; return 0; }
int nvmlDeviceGetUtilizationRates(void*, U* u) { u->gpu = 73; u->memory = 10; return 0; }
int nvmlDeviceGetMemoryInfo(void*, M* m) { m->total = 80ull << 30; m->used = 1ull << 30; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetPowerUsage(void*, unsigned* mw) { *mw = 250000; return 0; }
}
)";

TEST(GpuMonitor, SamplesTheDriversNumbers) {
  testing::TempDir dir;
  const std::string src = testing::write_file(dir, "fake_nvml.cpp", kFakeNvml), lib = dir / "libfake_nvml.so";
  if (testing::run_command("c++ -shared -fPIC -o " + lib + " " + src) != 0) GTEST_SKIP() << "no C++ compiler at test time";
  ScopedEnv env("SEQTRAIN_NVML_LIBRARY", lib);
  GpuMonitor m(0);
  ASSERT_TRUE(m.available()) << m.why_unavailable();
  const std::optional<GpuSample> s = m.sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->utilisation, 73);
  EXPECT_EQ(s->memory_used_mb, 1024);
  EXPECT_EQ(s->memory_total_mb, 80 * 1024);
  EXPECT_EQ(s->power_w, 250);
  GpuMonitor other(1);
  EXPECT_FALSE(other.available());
  EXPECT_CONTAINS(other.why_unavailable(), "NVML has no GPU 1: Invalid Argument");
}

}  // namespace
}  // namespace seqtrain
