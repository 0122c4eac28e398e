// Communicator: what the training loop needs from the other processes of a data-parallel run
// (Marian's ICommunicator, llm.c's multi_gpu_config): rank, world size, an in-place sum over
// ranks, broadcast from the primary, a barrier. It is never null: a single-process run gets
// LocalCommunicator, whose operations cost nothing, so the loop has one code path for any
// process count. The gradient reduction happens at one place (TrainStep, once per optimizer
// step), and only the primary rank writes the run directory. Under mpirun the CLI hands the
// loop dist/mpi_communicator.h's MpiCommunicator (docs/DISTRIBUTED.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"

namespace seqtrain {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  bool primary() const { return rank() == 0; }
  // Ranks of this run on this machine: the compute threads each rank takes by default are the
  // machine's cores divided among them.
  virtual int local_ranks() const { return 1; }
  // Sums data[0..n) over all ranks, in place, on every rank. The step passes the gradient buffer,
  // device memory of the model's backend: a multi-process communicator over a backend that is
  // not host_accessible() needs a device-aware collective (NCCL) or copies through the backend.
  // Every rank ends with the same bits (a fixed reduction order), so every rank applies the
  // same update and the replicas never drift apart.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  // Copies the primary's data[0..n) to every rank.
  virtual void broadcast(float* data, size_t n) = 0;
  // Copies rank `root`'s bytes (a config hash, an error message) to every rank. The default
  // serves one process; communicators of several ranks override it.
  virtual void broadcast_bytes(void* data, size_t bytes, int root = 0) {
    ST_CHECK(world() == 1, "internal error: this communicator of {} ranks cannot broadcast bytes", world());
    (void)data, (void)bytes, (void)root;
  }
  virtual void barrier() = 0;
};

// One process: rank 0 of 1; every operation leaves the data as it is.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void broadcast(float*, size_t) override {}
  void broadcast_bytes(void*, size_t, int = 0) override {}
  void barrier() override {}
};

// Rank `root`'s string on every rank (its length first, then its bytes).
inline std::string broadcast_string(Communicator& comm, std::string s, int root = 0) {
  uint64_t n = s.size();
  comm.broadcast_bytes(&n, sizeof n, root);
  s.resize(n);
  if (n) comm.broadcast_bytes(s.data(), n, root);
  return s;
}

}  // namespace seqtrain
