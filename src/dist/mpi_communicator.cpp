// MpiCommunicator: see mpi_communicator.h.
#include "dist/mpi_communicator.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (see mpi_session.cpp)
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <type_traits>

#include "dist/mpi_session.h"

namespace seqtrain::dist {
namespace {
constexpr int kMpiErrorExit = 5;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// An MPI call that failed leaves the job unusable: one message naming the rank and the call,
// then every rank ends.
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::fprintf(stderr, "seqtrain: error: rank %d: MPI %s failed: %.*s; ending every rank\n", world_rank(), what, len,
               text);
  abort_job(kMpiErrorExit);
}

// The ranks sharing this machine (its shared-memory group).
int ranks_on_this_machine() {
  MPI_Comm local;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "Comm_split_type");
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

// Adds the seconds of its lifetime to `total`.
struct Timed {
  explicit Timed(double& total) : total_(total), t0_(MPI_Wtime()) {}
  ~Timed() { total_ += MPI_Wtime() - t0_; }
  double& total_;
  double t0_;
};

template <typename T> MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else return MPI_DOUBLE;
}
}  // namespace

struct MpiCommunicator::Bucket {
  float* data = nullptr;
  std::vector<int> counts, displs, recv_counts, recv_displs;
  std::vector<float> recv;
  bool gather_back = true;  // false: train.zero's reduce-scatter (no all-gather)
  MPI_Request scatter = MPI_REQUEST_NULL, gather = MPI_REQUEST_NULL;
};

struct MpiCommunicator::Comms {
  MPI_Comm scatter = MPI_COMM_NULL, gather = MPI_COMM_NULL;
};

MpiCommunicator::MpiCommunicator(double timeout_s)
    : rank_(world_rank()), world_(world_size()), local_ranks_(ranks_on_this_machine()),
      watchdog_(rank_, world_, timeout_s), comms_(std::make_unique<Comms>()) {
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comms_->scatter), "Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comms_->gather), "Comm_dup");
}

// The duplicates are not freed: MPI_Comm_free is collective, and a rank that leaves by an error
// must not wait for the others; MPI_Finalize releases them.
MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::start_sum(float* data, size_t n, SumPart part) {
  if (world_ == 1 || n == 0) return;
  const Timed timed(stats_.seconds);
  stats_.reduced_bytes += static_cast<double>(n * sizeof(float));
  layout(n, part);
  Bucket& b = buckets_.emplace_back();
  b.data = data;
  b.gather_back = !part.scatter;
  b.counts = counts_;
  b.displs = displs_;
  const int mine = counts_[rank_];
  b.recv_counts.assign(world_, mine);
  b.recv_displs.resize(world_);
  for (int r = 0; r < world_; ++r) b.recv_displs[r] = r * mine;
  b.recv.resize(static_cast<size_t>(world_) * static_cast<size_t>(mine));
  check(MPI_Ialltoallv(data, b.counts.data(), b.displs.data(), MPI_FLOAT, b.recv.data(), b.recv_counts.data(),
                       b.recv_displs.data(), MPI_FLOAT, comms_->scatter, &b.scatter),
        "Ialltoallv (gradient bucket)");
}

// The bucket's slices are in: this rank's slice summed in rank order in double (all_reduce_sum's
// arithmetic), then the summed slices travel to every rank (unless the bucket is a scatter's).
void MpiCommunicator::sum_and_gather(Bucket& b) {
  const int mine = b.counts[rank_];
  float* out = b.data + b.displs[rank_];
  for (int i = 0; i < mine; ++i) {
    double s = 0;
    for (int r = 0; r < world_; ++r) s += static_cast<double>(b.recv[static_cast<size_t>(r) * mine + i]);
    out[i] = static_cast<float>(s);
  }
  if (!b.gather_back) return;  // gather stays MPI_REQUEST_NULL: done
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, b.data, b.counts.data(), b.displs.data(), MPI_FLOAT,
                        comms_->gather, &b.gather),
        "Iallgatherv (gradient bucket)");
}

void MpiCommunicator::progress() {
  if (buckets_.empty()) return;
  const Timed timed(stats_.seconds);
  // In the order started: a later bucket's all-gather never starts before an earlier one's.
  while (gathering_ < buckets_.size()) {
    int done = 0;
    check(MPI_Test(&buckets_[gathering_].scatter, &done, MPI_STATUS_IGNORE), "Test (gradient bucket)");
    if (!done) break;
    sum_and_gather(buckets_[gathering_++]);
  }
  // Lets the all-gathers in flight advance too (OpenMPI moves nonblocking collectives only
  // inside MPI calls).
  int flag = 0;
  for (size_t i = 0; i < gathering_; ++i) check(MPI_Test(&buckets_[i].gather, &flag, MPI_STATUS_IGNORE), "Test");
}

void MpiCommunicator::finish_sums() {
  if (buckets_.empty()) return;
  CollectiveWatchdog::Scope scope(watchdog_, "the gradient buckets' all-reduce");
  const Timed timed(stats_.seconds);
  const Timed waited(stats_.finish_seconds);
  ++stats_.reductions;
  stats_.buckets += static_cast<int64_t>(buckets_.size());
  for (size_t i = gathering_; i < buckets_.size(); ++i) {  // exchanged by now, not yet summed?
    int done = 0;
    check(MPI_Test(&buckets_[i].scatter, &done, MPI_STATUS_IGNORE), "Test (gradient bucket)");
    if (!done) break;  // the rest were started later; count in order
    ++stats_.buckets_early;
  }
  stats_.buckets_early += static_cast<int64_t>(gathering_);
  for (; gathering_ < buckets_.size(); ++gathering_) {
    check(MPI_Wait(&buckets_[gathering_].scatter, MPI_STATUS_IGNORE), "Wait (gradient bucket)");
    sum_and_gather(buckets_[gathering_]);
  }
  for (Bucket& b : buckets_) check(MPI_Wait(&b.gather, MPI_STATUS_IGNORE), "Wait (gradient bucket)");
  buckets_.clear();
  gathering_ = 0;
}

void MpiCommunicator::layout(size_t n, SumPart part) {
  ST_CHECK(n / static_cast<size_t>(world_) < static_cast<size_t>(INT_MAX) / 2,
           "a buffer of {} values is too large for one MPI collective", n);
  counts_.resize(static_cast<size_t>(world_));
  displs_.resize(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    Slice s = slice_of(n, r, world_);
    if (part.scatter) {  // rank r's slice of the whole buffer, within the bucket
      const Slice w = slice_of(part.whole, r, world_);
      s.begin = std::clamp(w.begin, part.offset, part.offset + n) - part.offset;
      s.end = std::clamp(w.end, part.offset, part.offset + n) - part.offset;
    }
    displs_[r] = static_cast<int>(s.begin);
    counts_[r] = static_cast<int>(s.size());
  }
}

// gather false: the reduce-scatter half only (train.zero), this rank's slice summed.
template <typename T> void MpiCommunicator::reduce(T* data, size_t n, bool gather_back) {
  if (world_ == 1 || n == 0) return;
  CollectiveWatchdog::Scope scope(watchdog_, gather_back ? "an all-reduce" : "a reduce-scatter");
  const Timed timed(stats_.seconds);
  if (n > 16) {
    ++stats_.reductions;
    stats_.reduced_bytes += static_cast<double>(n * sizeof(T));
  }
  layout(n);
  const int W = world_;
  const int mine = counts_[rank_];
  std::vector<int> recv_counts(W), recv_displs(W);
  for (int r = 0; r < W; ++r) {
    recv_counts[r] = mine;
    recv_displs[r] = r * mine;
  }
  std::vector<T>& recv = [&]() -> std::vector<T>& {
    if constexpr (std::is_same_v<T, float>) return recv_f_;
    else return recv_d_;
  }();
  recv.resize(static_cast<size_t>(W) * static_cast<size_t>(mine));
  // Each rank's copy of this rank's slice, in rank order.
  check(MPI_Alltoallv(data, counts_.data(), displs_.data(), mpi_type<T>(), recv.data(), recv_counts.data(),
                      recv_displs.data(), mpi_type<T>(), MPI_COMM_WORLD),
        "Alltoallv (all-reduce)");
  // Rank order, in double: the same sum on every run with this rank count.
  T* out = data + displs_[rank_];
  for (int i = 0; i < mine; ++i) {
    double s = 0;
    for (int r = 0; r < W; ++r) s += static_cast<double>(recv[static_cast<size_t>(r) * mine + i]);
    out[i] = static_cast<T>(s);
  }
  if (gather_back)
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, mpi_type<T>(), data, counts_.data(), displs_.data(), mpi_type<T>(),
                         MPI_COMM_WORLD),
          "Allgatherv (all-reduce)");
}

void MpiCommunicator::all_reduce_sum(float* data, size_t n) { reduce(data, n, true); }
void MpiCommunicator::all_reduce_sum(double* data, size_t n) { reduce(data, n, true); }
void MpiCommunicator::reduce_scatter_sum(float* data, size_t n) { reduce(data, n, false); }

void MpiCommunicator::all_gather(float* data, size_t n) {
  if (world_ == 1 || n == 0) return;
  CollectiveWatchdog::Scope scope(watchdog_, "an all-gather");
  const Timed timed(stats_.seconds);
  layout(n);
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, data, counts_.data(), displs_.data(), MPI_FLOAT, MPI_COMM_WORLD),
        "Allgatherv (parameters)");
}

void MpiCommunicator::gather_to_primary(const float* mine, float* all, size_t n) {
  if (world_ == 1) {
    std::copy(mine, mine + n, all);
    return;
  }
  if (n == 0) return;
  CollectiveWatchdog::Scope scope(watchdog_, "a gather");
  const Timed timed(stats_.seconds);
  layout(n);
  check(MPI_Gatherv(mine, counts_[rank_], MPI_FLOAT, all, counts_.data(), displs_.data(), MPI_FLOAT, 0,
                    MPI_COMM_WORLD),
        "Gatherv (optimizer state)");
}

void MpiCommunicator::broadcast(float* data, size_t n) { broadcast_bytes(data, n * sizeof(float)); }

void MpiCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  if (world_ == 1) return;
  CollectiveWatchdog::Scope scope(watchdog_, "a broadcast");
  const Timed timed(stats_.seconds);
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {  // MPI counts are ints
    const int chunk = static_cast<int>(std::min<size_t>(bytes, INT_MAX / 2));
    check(MPI_Bcast(p, chunk, MPI_BYTE, root, MPI_COMM_WORLD), "Bcast");
    p += chunk;
    bytes -= static_cast<size_t>(chunk);
  }
}

void MpiCommunicator::barrier() {
  if (world_ == 1) return;
  CollectiveWatchdog::Scope scope(watchdog_, "a barrier");
  const Timed timed(stats_.seconds);
  check(MPI_Barrier(MPI_COMM_WORLD), "Barrier");
}

}  // namespace seqtrain::dist
