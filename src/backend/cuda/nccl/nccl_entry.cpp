// The plugin's NCCL entry points (plugin_abi.h): the bootstrap id and a communicator joined with
// it. Built when CMake found NCCL; nccl/no_nccl_entry.cpp stands in for them otherwise.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl/nccl_communicator.h"
#include "backend/cuda/plugin_abi.h"

extern "C" {

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
    return new seqtrain::cuda::NcclCommunicator(seqtrain::cuda::plugin_backend(device), *host, unique);
  } catch (const std::exception& e) {
    std::snprintf(why, why_n, "%s", e.what());
    return nullptr;
  }
}

}  // extern "C"
