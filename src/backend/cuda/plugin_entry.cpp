// The plugin's C entry points (plugin_abi.h), which backend/cuda_plugin.cpp finds with dlsym.
// No exception crosses them: a failure comes back as null or a count <= 0 with the message
// copied into the caller's buffer.
#include <cuda_runtime.h>

#include <cstdio>
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
  static std::mutex mu;
  static std::map<int, std::unique_ptr<seqtrain::cuda::CudaBackend>> backends;
  try {
    std::lock_guard<std::mutex> lock(mu);
    auto& b = backends[device];
    if (!b) b = std::make_unique<seqtrain::cuda::CudaBackend>(device);
    return b.get();
  } catch (const std::exception& e) {
    copy_message(e.what(), why, n);
    return nullptr;
  }
}

}  // extern "C"
