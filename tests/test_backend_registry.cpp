// The backend registry (backend/registry.h): names to backends, and what a run resolves by its
// device (the precision rule, the GPU index for the monitor) instead of by testing names.
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "guarded_backend.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::error_of;

TEST(BackendRegistry, BuiltInNamesResolveAndAnUnknownOneListsTheRegistered) {
  EXPECT_EQ(backend_named("cpu").name(), "cpu");
  EXPECT_EQ(&backend_named("cpu"), &default_backend());
  EXPECT_EQ(backend_named("reference").name(), "reference");
  EXPECT_EQ(gpu_ordinal(backend_named("cpu")), -1);
  EXPECT_EQ(gpu_ordinal(backend_named("reference")), -1);
  const std::string e = error_of([] { backend_named("vulkan"); });
  EXPECT_CONTAINS(e, "runtime.backend 'vulkan' is not known");
  EXPECT_CONTAINS(e, "cpu, reference, cuda...");
  // The GPU rule answers without a GPU: it is the device's rule, not the plugin's state.
  EXPECT_EQ(resolve_precision("auto", "cuda:3", nullptr), (Precision{.compute = DType::bf16}));
}

// A device added at run time is served by name prefix, resolves its own precision and names its
// GPU; the training loop and the precision policy ask the registry, so they need no change.
TEST(BackendRegistry, ARegisteredDeviceIsServedWithItsOwnRules) {
  static testing::GuardedBackend guarded(backend_named("reference"), /*protect=*/false);
  BackendEntry e;
  e.name = "guarded";
  e.prefix = true;
  e.make = [](std::string_view) -> Backend& { return guarded; };
  e.precision = [](const std::string&, std::string_view, std::string* why) {
    if (why) *why = "the guarded device computes in fp16";
    return Precision{.compute = DType::f16, .loss_scaling = true};
  };
  e.gpu_ordinal = [](std::string_view) { return 5; };
  register_backend(e);
  EXPECT_EQ(&backend_named("guarded"), &guarded);
  EXPECT_EQ(gpu_ordinal(guarded), 5);
  std::string why;
  EXPECT_EQ(resolve_precision("fp32", "guarded", &why), (Precision{.compute = DType::f16, .loss_scaling = true}));
  EXPECT_EQ(why, "the guarded device computes in fp16");
  EXPECT_CONTAINS(error_of([&] { register_backend(e); }), "registered twice");
}

}  // namespace
}  // namespace seqtrain
