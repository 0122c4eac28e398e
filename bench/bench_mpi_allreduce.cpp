// The gradient sum's own cost under mpirun, apart from the wait for a slower rank that a loaded
// machine adds to every step: after a barrier, one all-reduce of W1's and W2's gradient buffers
// (0.2 M and 3.4 M floats) as the step makes it without the overlap, and the same sum in 256 KB
// buckets (start_sum ... finish_sums, all started at once: the overlap's messages without a
// backward to hide under). Medians of REPS (argv[1], default 20) in ms, printed by rank 0. What
// the overlap can hide per step is at most the first figure (docs/DISTRIBUTED.md, "Overlap").
// Usage: mpirun -np 2 build/bench_mpi_allreduce [REPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/mpi_communicator.h"
#include "dist/mpi_session.h"
#include "train/grad_buckets.h"

using namespace seqtrain;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  dist::MpiSession session;
  if (!dist::MpiSession::active()) {
    std::fprintf(stderr, "run under mpirun: mpirun -np 2 %s\n", argv[0]);
    return 2;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  dist::MpiCommunicator comm;
  for (const auto& [name, n] : {std::pair{"W1", size_t{200000}}, std::pair{"W2", size_t{3400000}}}) {
    std::vector<float> g(n, 1.f);
    std::vector<double> flat, bucketed;
    for (int r = 0; r < reps; ++r) {
      comm.barrier();
      auto t0 = std::chrono::steady_clock::now();
      comm.all_reduce_sum(g.data(), n);
      flat.push_back(ms(t0));
      comm.barrier();
      t0 = std::chrono::steady_clock::now();
      for (const Slice& b : gradient_buckets(n, 65536)) comm.start_sum(g.data() + b.begin, b.size(), SumPart{});
      comm.finish_sums();
      bucketed.push_back(ms(t0));
    }
    if (comm.primary())
      std::printf("%s: %zu floats (%.1f MB) over %d ranks: all-reduce %.2f ms, in 256 KB buckets %.2f ms (medians of %d)\n",
                  name, n, n * 4.0 / 1e6, comm.world(), median(flat), median(bucketed), reps);
  }
  return 0;
}
