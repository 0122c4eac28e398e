// The CUDA plugin's entry points (backend/cuda_plugin.h loads them with dlsym). Plain C
// functions, so that the loader finds them by name; the Backend they return is a C++ object of
// the same build, which kCudaPluginAbi checks (bump it whenever Backend's or Communicator's layout
// or these entry points change).
#pragma once
#include <cstddef>

namespace seqtrain {
class Backend;
class Communicator;
inline constexpr int kCudaPluginAbi = 4;
}  // namespace seqtrain

extern "C" {
// kCudaPluginAbi of the build that made the plugin.
int seqtrain_cuda_abi();
// The number of GPUs the CUDA runtime sees; 0 or less with the reason written into why[0, n).
int seqtrain_cuda_device_count(char* why, size_t n);
// The backend of GPU `device` (created on the first call, kept for the process); null with the
// reason in why[0, n) when it cannot start.
seqtrain::Backend* seqtrain_cuda_backend(int device, char* why, size_t n);
// NCCL's bootstrap id (ncclGetUniqueId, made by rank 0 only) into id[0, n): its size in bytes, or
// 0 with the reason in why[0, why_n).
size_t seqtrain_nccl_unique_id(void* id, size_t n, char* why, size_t why_n);
// The device communicator of GPU `device` for rank host->rank() of host->world(), joined to the
// clique of id[0, n) (rank 0's seqtrain_nccl_unique_id, broadcast through host); host serves the
// collectives on host memory. Owned by the caller (delete); null with the reason in why.
seqtrain::Communicator* seqtrain_nccl_communicator(int device, seqtrain::Communicator* host, const void* id,
                                                   size_t n, char* why, size_t why_n);
}
