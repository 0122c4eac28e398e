// MpiCommunicator: the Communicator (train/communicator.h) of a data-parallel run under mpirun:
// one process per rank over MPI_COMM_WORLD, on one machine or several (docs/DISTRIBUTED.md).
// Sums have a fixed reduction order: the buffer is cut into one slice per rank, every rank
// receives each rank's copy of its own slice (all-to-all), adds them in rank order in double,
// and the summed slices are gathered back to every rank (the bandwidth of a ring all-reduce,
// 2 (N-1)/N of the buffer per rank). So every rank holds the same bits, and two runs with the
// same rank count sum alike, which runtime.deterministic's bit-for-bit promise needs.
// Every collective runs under a CollectiveWatchdog; an MPI error ends the job with one message.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "dist/watchdog.h"
#include "train/communicator.h"

namespace seqtrain::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Needs an active MpiSession. timeout_s: runtime.collective_timeout_s (set_timeout once the
  // config is read).
  explicit MpiCommunicator(double timeout_s = 300.0);
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_ranks() const override { return local_ranks_; }
  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_sum(double* data, size_t n) override;
  void broadcast(float* data, size_t n) override;
  void broadcast_bytes(void* data, size_t bytes, int root = 0) override;
  void barrier() override;
  // train.zero's: half an all-reduce each (the Alltoallv and sum, or the Allgatherv), and an
  // MPI_Gatherv to rank 0 for a checkpoint.
  void reduce_scatter_sum(float* data, size_t n) override;
  void all_gather(float* data, size_t n) override;
  void gather_to_primary(const float* mine, float* all, size_t n) override;
  // The overlap's nonblocking sums: an MPI_Ialltoallv of the bucket's slices, then (once it
  // is in, from progress() or finish_sums(), bucket by bucket in the order started) the
  // rank-order sum in double and an MPI_Iallgatherv. Each phase has its own duplicate of
  // MPI_COMM_WORLD, so both see their collectives in the same order on every rank whichever
  // bucket a rank finds done first.
  // A scatter part cuts the bucket at the slices of the whole buffer and skips the all-gather.
  void start_sum(float* data, size_t n, SumPart part) override;
  void progress() override;
  void finish_sums() override;
  ~MpiCommunicator() override;
  void set_timeout(double seconds) { watchdog_.set_timeout(seconds); }
  // What this rank spent in collectives (waits for slower ranks included): bench/mpi.sh's
  // communication share, printed by the CLI at the end of a run.
  struct Stats {
    double seconds = 0;
    int64_t reductions = 0;  // all-reduces of more than a few values (the gradients)
    double reduced_bytes = 0;
    // The overlap's buckets: how many, how many had their data exchanged (the all-to-all phase
    // done) before the step waited in finish_sums, and the seconds it waited there (what the
    // backward did not hide).
    int64_t buckets = 0, buckets_early = 0;
    double finish_seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  template <typename T> void reduce(T* data, size_t n, bool gather_back);
  // The counts and displacements of slice_of's slices, as MPI's int arrays; with a scatter part,
  // of the whole buffer's slices within [part.offset, part.offset + n).
  void layout(size_t n, SumPart part = {});
  std::vector<int> counts_, displs_;
  int rank_ = 0, world_ = 1, local_ranks_ = 1;
  Stats stats_;
  CollectiveWatchdog watchdog_;
  struct Bucket;
  void sum_and_gather(Bucket& b);
  std::deque<Bucket> buckets_;  // started and not finished (a deque: MPI holds their addresses)
  size_t gathering_ = 0;        // buckets_[0, gathering_) have their all-gather started
  struct Comms;  // the two duplicates of MPI_COMM_WORLD (mpi.h stays in the .cpp)
  std::unique_ptr<Comms> comms_;
  std::vector<float> recv_f_;   // each rank's copy of this rank's slice (floats)
  std::vector<double> recv_d_;  // the same for doubles
};

}  // namespace seqtrain::dist
