// NcclCommunicator: the Communicator (train/communicator.h) of a data-parallel run on GPUs, one
// process per GPU: the collectives on device memory (the gradients, the parameters) run on NCCL,
// queued on the CUDA backend's stream in call order, so they follow the backward that wrote the
// gradients and precede the update that reads them without a host synchronization. Everything
// else (host values: target counts, stop flags, loss sums, the optimizer state broadcast on
// resume, config bytes) goes to the host communicator it wraps, MPI's, which also bootstrapped
// it: rank 0 made the NCCL id and MPI broadcast it (dist/device_communicator.h).
// Which of the two serves a float or double call is decided by where the data lives
// (cudaPointerGetAttributes): device and managed memory go to NCCL, host memory to the host
// communicator, so one Communicator serves the step and the loop alike.
// Sums are NCCL's float (double) sums: for a fixed GPU count, topology and NCCL version every
// rank gets the same bits and two runs sum alike (docs/DISTRIBUTED.md, "NCCL").
#pragma once
#include <nccl.h>

#include "backend/cuda/cuda_backend.h"
#include "train/communicator.h"

namespace seqtrain::cuda {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the clique of `id` (ncclGetUniqueId's bytes from rank 0) as host.rank() of
  // host.world() on be's GPU; blocks until every rank has joined. Error with NCCL's message.
  NcclCommunicator(CudaBackend& be, Communicator& host, const ncclUniqueId& id);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_.rank(); }
  int world() const override { return host_.world(); }
  int local_ranks() const override { return host_.local_ranks(); }
  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_sum(double* data, size_t n) override;
  void broadcast(float* data, size_t n) override;
  void broadcast_bytes(void* data, size_t bytes, int root = 0) override { host_.broadcast_bytes(data, bytes, root); }
  // The stream's queued collectives done, then the host communicator's barrier.
  void barrier() override;
  // ZeRO's halves over slice_of's slices, which may differ in size by one (ncclReduceScatter and
  // ncclAllGather want equal ones): one ncclReduce (ncclBroadcast) to (from) each slice's owner,
  // grouped into one launch.
  void reduce_scatter_sum(float* data, size_t n) override;
  void all_gather(float* data, size_t n) override;
  // Host memory (a checkpoint's optimizer moments): the host communicator's.
  void gather_to_primary(const float* mine, float* all, size_t n) override { host_.gather_to_primary(mine, all, n); }

 private:
  template <typename T> void sum(T* data, size_t n);
  CudaBackend& be_;
  Communicator& host_;
  ncclComm_t comm_ = nullptr;
};

// Whether p points into device (or managed) memory rather than the host's.
bool on_device(const void* p);

}  // namespace seqtrain::cuda
