// Communicator: what the training loop needs from the other processes of a data-parallel run
// (Marian's ICommunicator, llm.c's multi_gpu_config): rank, world size, an in-place sum over
// ranks, broadcast from the primary, a barrier. It is never null: a single-process run gets
// LocalCommunicator, whose operations cost nothing, so the loop has one code path for any
// process count. The gradient reduction happens at one place (TrainStep, once per optimizer
// step), and only the primary rank writes the run directory.
#pragma once
#include <cstddef>
#include <memory>

namespace seqtrain {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  bool primary() const { return rank() == 0; }
  // Sums data[0..n) over all ranks, in place, on every rank. The step passes the gradient buffer,
  // device memory of the model's backend: a multi-process communicator over a backend that is
  // not host_accessible() needs a device-aware collective (NCCL) or copies through the backend.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  // Copies the primary's data[0..n) to every rank.
  virtual void broadcast(float* data, size_t n) = 0;
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
  void barrier() override {}
};

}  // namespace seqtrain
