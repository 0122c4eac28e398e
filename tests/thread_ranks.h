// ThreadGroup and ThreadComm: ranks as threads of one process, for tests of what a data-parallel
// run decides across ranks without MPI. Sums are taken in double, over the ranks in a fixed order,
// behind barriers, so every rank gets the same bits; broadcasts copy the root's bytes. The
// Communicator's default reduce-scatter, all-gather and gather (communicator.h) run on top.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "train/communicator.h"

namespace seqtrain::testing {

struct ThreadGroup {
  explicit ThreadGroup(int w) : world(w), parts(w) {}
  int world;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  std::vector<std::vector<double>> parts;
  std::vector<char> shared;  // a broadcast's bytes from its root
  void barrier() {
    std::unique_lock<std::mutex> lock(m);
    const int64_t g = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != g; });
    }
  }
};

struct ThreadComm : Communicator {
  ThreadGroup& g;
  int r;
  ThreadComm(ThreadGroup& group, int rank) : g(group), r(rank) {}
  int rank() const override { return r; }
  int world() const override { return g.world; }
  template <typename T> void reduce(T* data, size_t n) {
    g.parts[r].assign(data, data + n);
    g.barrier();
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 0; k < g.world; ++k) sum += g.parts[k][i];
      data[i] = static_cast<T>(sum);
    }
    g.barrier();  // nobody overwrites its part before every rank has read them all
  }
  void all_reduce_sum(float* d, size_t n) override { reduce(d, n); }
  void all_reduce_sum(double* d, size_t n) override { reduce(d, n); }
  // The root's bytes to every rank (the test pass's `best` weights, rank 0's figures).
  void broadcast_bytes(void* data, size_t n, int root) override {
    if (r == root) g.shared.assign(static_cast<char*>(data), static_cast<char*>(data) + n);
    g.barrier();
    if (r != root) std::memcpy(data, g.shared.data(), n);
    g.barrier();  // nobody overwrites `shared` before every rank has copied it
  }
  void broadcast(float* d, size_t n) override { broadcast_bytes(d, n * sizeof(float), 0); }
  void barrier() override { g.barrier(); }
};

}  // namespace seqtrain::testing
