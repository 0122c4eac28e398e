// The plugin's C entry points (plugin_abi.h), which backend/cuda_plugin.cpp finds with dlsym; NCCL's
// two are in nccl/nccl_entry.cpp (or nccl/no_nccl_entry.cpp in a build without NCCL).
// No exception crosses them: a failure comes back as null or a count <= 0 with the message
// copied into the caller's buffer.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/plugin_abi.h"

namespace {

void copy_message(const char* msg, char* why, size_t n) {
  if (why && n) std::snprintf(why, n, "%s", msg);
}

}  // namespace

seqtrain::cuda::CudaBackend& seqtrain::cuda::plugin_backend(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaBackend>> backends;
  std::lock_guard<std::mutex> lock(mu);
  auto& b = backends[device];
  if (!b) b = std::make_unique<CudaBackend>(device);
  return *b;
}

extern "C" {

int seqtrain_cuda_abi() { return seqtrain::kCudaPluginAbi; }

int seqtrain_cuda_device_count(char* why, size_t n) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // No driver, a driver older than this runtime, no device: the runtime's own words.
    std::snprintf(why, n, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
  }
  if (count == 0) copy_message("the CUDA runtime sees no GPU", why, n);
  return count;
}

seqtrain::Backend* seqtrain_cuda_backend(int device, char* why, size_t n) {
  try {
    return &seqtrain::cuda::plugin_backend(device);
  } catch (const std::exception& e) {
    copy_message(e.what(), why, n);
    return nullptr;
  }
}

}  // extern "C"
