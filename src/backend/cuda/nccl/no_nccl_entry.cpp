// NCCL's plugin entry points (plugin_abi.h) in a CUDA plugin built without NCCL (CMake found no
// libnccl beside the toolkit, or SEQTRAIN_NCCL=OFF): the GPU backend works, one process per run;
// a data-parallel run on GPUs asks for the id first and gets this reason, which the host side
// (backend/cuda_plugin.cpp) turns into an error naming runtime.device and the fix.
#include <cstdio>

#include "backend/cuda/plugin_abi.h"

namespace {
constexpr const char* kNoNccl =
    "this build's CUDA plugin has no NCCL (CMake found no libnccl at build time): install NCCL "
    "(libnccl-dev, or NVIDIA's nccl package) and rebuild";
}  // namespace

extern "C" {

size_t seqtrain_nccl_unique_id(void*, size_t, char* why, size_t why_n) {
  std::snprintf(why, why_n, "%s", kNoNccl);
  return 0;
}

seqtrain::Communicator* seqtrain_nccl_communicator(int, seqtrain::Communicator*, const void*, size_t, char* why,
                                                   size_t why_n) {
  std::snprintf(why, why_n, "%s", kNoNccl);
  return nullptr;
}

}  // extern "C"
