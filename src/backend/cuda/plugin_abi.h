// The CUDA plugin's entry points (backend/cuda_plugin.h loads them with dlsym). Plain C
// functions, so that the loader finds them by name; the Backend they return is a C++ object of
// the same build, which kCudaPluginAbi checks (bump it whenever Backend's layout changes).
#pragma once
#include <cstddef>

namespace seqtrain {
class Backend;
inline constexpr int kCudaPluginAbi = 1;
}  // namespace seqtrain

extern "C" {
// kCudaPluginAbi of the build that made the plugin.
int seqtrain_cuda_abi();
// The number of GPUs the CUDA runtime sees; 0 or less with the reason written into why[0, n).
int seqtrain_cuda_device_count(char* why, size_t n);
// The backend of GPU `device` (created on the first call, kept for the process); null with the
// reason in why[0, n) when it cannot start.
seqtrain::Backend* seqtrain_cuda_backend(int device, char* why, size_t n);
}
