// CollectiveWatchdog: see watchdog.h.
#include "dist/watchdog.h"

#include <chrono>
#include <cstdio>

#include "dist/mpi_session.h"

namespace seqtrain::dist {
namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
constexpr int kTimeoutExit = 4;
}  // namespace

CollectiveWatchdog::CollectiveWatchdog(int rank, int world, double timeout_s)
    : rank_(rank), world_(world), timeout_s_(timeout_s), thread_([this] { watch(); }) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

CollectiveWatchdog::Scope::Scope(CollectiveWatchdog& w, const char* what) : w_(w) {
  w_.what_.store(what);
  w_.entered_ns_.store(now_ns());
}

CollectiveWatchdog::Scope::~Scope() { w_.entered_ns_.store(0); }

void CollectiveWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
    const int64_t entered = entered_ns_.load();
    if (entered == 0) continue;
    const double waited = static_cast<double>(now_ns() - entered) / 1e9;
    if (waited <= timeout_s_.load()) continue;
    std::fprintf(stderr,
                 "seqtrain: error: rank %d of %d waited %.0f s in %s for the other ranks "
                 "(runtime.collective_timeout_s = %g): another rank died, hung or stopped early; ending every "
                 "rank. The last whole checkpoint is kept: continue with `seqtrain train --resume RUN_DIR`.\n",
                 rank_, world_, waited, what_.load(), timeout_s_.load());
    abort_job(kTimeoutExit);
  }
}

}  // namespace seqtrain::dist
