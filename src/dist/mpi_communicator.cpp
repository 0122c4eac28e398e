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

MpiCommunicator::MpiCommunicator(double timeout_s)
    : rank_(world_rank()), world_(world_size()), local_ranks_(ranks_on_this_machine()),
      watchdog_(rank_, world_, timeout_s) {}

template <typename T> void MpiCommunicator::reduce(T* data, size_t n) {
  if (world_ == 1 || n == 0) return;
  CollectiveWatchdog::Scope scope(watchdog_, "an all-reduce");
  const Timed timed(stats_.seconds);
  if (n > 16) {
    ++stats_.reductions;
    stats_.reduced_bytes += static_cast<double>(n * sizeof(T));
  }
  ST_CHECK(n / static_cast<size_t>(world_) < static_cast<size_t>(INT_MAX) / 2,
           "a buffer of {} values is too large for one MPI all-reduce", n);
  const int W = world_;
  std::vector<int> counts(W), displs(W), recv_counts(W), recv_displs(W);
  for (int r = 0; r < W; ++r) {
    const size_t lo = n * static_cast<size_t>(r) / static_cast<size_t>(W);
    const size_t hi = n * static_cast<size_t>(r + 1) / static_cast<size_t>(W);
    displs[r] = static_cast<int>(lo);
    counts[r] = static_cast<int>(hi - lo);
  }
  const int mine = counts[rank_];
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
  check(MPI_Alltoallv(data, counts.data(), displs.data(), mpi_type<T>(), recv.data(), recv_counts.data(),
                      recv_displs.data(), mpi_type<T>(), MPI_COMM_WORLD),
        "Alltoallv (all-reduce)");
  // Rank order, in double: the same sum on every run with this rank count.
  T* out = data + displs[rank_];
  for (int i = 0; i < mine; ++i) {
    double s = 0;
    for (int r = 0; r < W; ++r) s += static_cast<double>(recv[static_cast<size_t>(r) * mine + i]);
    out[i] = static_cast<T>(s);
  }
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, mpi_type<T>(), data, counts.data(), displs.data(), mpi_type<T>(),
                       MPI_COMM_WORLD),
        "Allgatherv (all-reduce)");
}

void MpiCommunicator::all_reduce_sum(float* data, size_t n) { reduce(data, n); }
void MpiCommunicator::all_reduce_sum(double* data, size_t n) { reduce(data, n); }

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
