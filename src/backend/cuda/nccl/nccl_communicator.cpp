// NcclCommunicator: see nccl_communicator.h.
#include "backend/cuda/nccl/nccl_communicator.h"

#include <type_traits>

#include "backend/cuda/cuda_check.h"

namespace seqtrain::cuda {
namespace {

void check(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  fail("NCCL {} failed: {}{}{}", call, ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

// NCCL's group of one call per rank's slice: f(slice, owner).
template <typename F> void per_slice(size_t n, int world, ncclComm_t comm, F f) {
  check(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world; ++r) f(slice_of(n, r, world), r);
  check(ncclGroupEnd(), "ncclGroupEnd", comm);
}

}  // namespace

bool on_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is host memory; clear the sticky error
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

NcclCommunicator::NcclCommunicator(CudaBackend& be, Communicator& host, const ncclUniqueId& id)
    : be_(be), host_(host) {
  ST_CUDA(cudaSetDevice(be_.device()));
  check(ncclCommInitRank(&comm_, host_.world(), id, host_.rank()), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
}

template <typename T> void NcclCommunicator::sum(T* data, size_t n) {
  if (n == 0) return;
  if (!on_device(data)) return host_.all_reduce_sum(data, n);
  const ncclDataType_t type = std::is_same_v<T, float> ? ncclFloat : ncclDouble;
  check(ncclAllReduce(data, data, n, type, ncclSum, comm_, be_.stream()), "ncclAllReduce", comm_);
}

void NcclCommunicator::all_reduce_sum(float* data, size_t n) { sum(data, n); }
void NcclCommunicator::all_reduce_sum(double* data, size_t n) { sum(data, n); }

void NcclCommunicator::broadcast(float* data, size_t n) {
  if (n == 0) return;
  if (!on_device(data)) return host_.broadcast(data, n);
  check(ncclBroadcast(data, data, n, ncclFloat, 0, comm_, be_.stream()), "ncclBroadcast", comm_);
}

void NcclCommunicator::barrier() {
  ST_CUDA(cudaStreamSynchronize(be_.stream()));
  host_.barrier();
}

void NcclCommunicator::reduce_scatter_sum(float* data, size_t n) {
  if (n == 0) return;
  if (!on_device(data)) return host_.reduce_scatter_sum(data, n);
  per_slice(n, world(), comm_, [&](const Slice& s, int owner) {
    check(ncclReduce(data + s.begin, data + s.begin, s.size(), ncclFloat, ncclSum, owner, comm_, be_.stream()),
          "ncclReduce", comm_);
  });
}

void NcclCommunicator::all_gather(float* data, size_t n) {
  if (n == 0) return;
  if (!on_device(data)) return host_.all_gather(data, n);
  per_slice(n, world(), comm_, [&](const Slice& s, int owner) {
    check(ncclBroadcast(data + s.begin, data + s.begin, s.size(), ncclFloat, owner, comm_, be_.stream()),
          "ncclBroadcast", comm_);
  });
}

}  // namespace seqtrain::cuda
