// The plugin's C entry points (plugin_abi.h), which backend/cuda_plugin.cpp finds with dlsym.
// No exception crosses them: a failure comes back as null or a count <= 0 with the message
// copied into the caller's buffer.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/plugin_abi.h"

namespace {

void copy_message(const char* msg, char* why, size_t n) {
  if (why && n) std::snprintf(why, n, "%s", msg);
}

// The backend of GPU `device`, created on the first call and kept for the process.
seqtrain::cuda::CudaBackend& backend_of(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<seqtrain::cuda::CudaBackend>> backends;
  std::lock_guard<std::mutex> lock(mu);
  auto& b = backends[device];
  if (!b) b = std::make_unique<seqtrain::cuda::CudaBackend>(device);
  return *b;
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
  try {
    return &backend_of(device);
  } catch (const std::exception& e) {
    copy_message(e.what(), why, n);
    return nullptr;
  }
}

size_t seqtrain_nccl_unique_id(void* id, size_t n, char* why, size_t why_n) {
  ncclUniqueId made;
  const ncclResult_t r = ncclGetUniqueId(&made);
  if (r != ncclSuccess) {
    std::snprintf(why, why_n, "ncclGetUniqueId failed: %s", ncclGetErrorString(r));
    return 0;
  }
  if (n < sizeof made) {
    std::snprintf(why, why_n, "an NCCL id needs %zu bytes, the caller gave %zu", sizeof made, n);
    return 0;
  }
  std::memcpy(id, &made, sizeof made);
  return sizeof made;
}

seqtrain::Communicator* seqtrain_nccl_communicator(int device, seqtrain::Communicator* host, const void* id,
                                                   size_t n, char* why, size_t why_n) {
  try {
    ncclUniqueId unique;
    if (n != sizeof unique) {
      std::snprintf(why, why_n, "an NCCL id is %zu bytes, this one %zu", sizeof unique, n);
      return nullptr;
    }
    std::memcpy(&unique, id, sizeof unique);
    return new seqtrain::cuda::NcclCommunicator(backend_of(device), *host, unique);
  } catch (const std::exception& e) {
    copy_message(e.what(), why, why_n);
    return nullptr;
  }
}

}  // extern "C"
