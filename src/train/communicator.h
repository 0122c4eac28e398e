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
#include <vector>

#include "core/error.h"

namespace seqtrain {

// Rank r's contiguous slice [begin, end) of a buffer of n values over `world` ranks: the slice
// whose sum a rank forms in an all-reduce, and under train.zero the parameters it updates and
// the AdamW moments it keeps. One formula for both, so the two agree by construction.
struct Slice {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};
inline Slice slice_of(size_t n, int rank, int world) {
  const auto r = static_cast<size_t>(rank), w = static_cast<size_t>(world);
  return {n * r / w, n * (r + 1) / w};
}

// Where a started sum's data sits (Communicator::start_sum): a plain all-reduce, or with `scatter`
// (train.zero's buckets) data is [offset, offset + n) of a buffer of `whole` values, and each rank
// needs only the sums of its slice_of(whole, rank, world) within it.
struct SumPart {
  bool scatter = false;
  size_t offset = 0, whole = 0;
};

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

  // The overlap's sums (train/grad_buckets.h): start_sum begins summing data[0..n) over the
  // ranks, as all_reduce_sum would, and may return before it is done; data must not be touched
  // until finish_sums(), which completes every started sum in the order started. progress() lets
  // started sums advance between layers' backward. Every rank starts the same sums in the same
  // order. The default sums at once (a communicator without nonblocking collectives);
  // MpiCommunicator's are nonblocking, with all_reduce_sum's fixed order and bits.
  // With a `scatter` part (train.zero): reduce_scatter_sum bucket by bucket, with its bits (the
  // default's all-reduce holds them too).
  virtual void start_sum(float* data, size_t n, SumPart part) {
    (void)part;
    all_reduce_sum(data, n);
  }
  virtual void progress() {}
  virtual void finish_sums() {}

  // ZeRO stage 1's collectives (train.zero), over slice_of(n, rank(), world()).
  // The sum over ranks of data's slice of this rank lands in that slice, in all_reduce_sum's
  // fixed order (the same bits as all_reduce_sum there); the rest of data is left unspecified.
  // The default sums the whole buffer (correct, not cheaper); MpiCommunicator sends each rank
  // only its slice.
  virtual void reduce_scatter_sum(float* data, size_t n) { all_reduce_sum(data, n); }
  // Every rank's slice of data to every rank. The default zeroes the others' slices and sums
  // (x + 0 is exact, so the bits are the owner's).
  virtual void all_gather(float* data, size_t n) {
    if (world() == 1) return;
    const Slice s = slice_of(n, rank(), world());
    for (size_t i = 0; i < n; ++i)
      if (i < s.begin || i >= s.end) data[i] = 0.f;
    all_reduce_sum(data, n);
  }
  // This rank's slice `mine` (slice_of(n, rank(), world()).size() values) into all[0..n) on the
  // primary; `all` is unused elsewhere (a checkpoint of sharded AdamW moments).
  virtual void gather_to_primary(const float* mine, float* all, size_t n) {
    const Slice s = slice_of(n, rank(), world());
    std::vector<float> full(n, 0.f);
    for (size_t i = 0; i < s.size(); ++i) full[s.begin + i] = mine[i];
    all_gather(full.data(), n);
    if (primary())
      for (size_t i = 0; i < n; ++i) all[i] = full[i];
  }
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
