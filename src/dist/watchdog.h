// CollectiveWatchdog: the bound on how long a rank of a data-parallel run waits for the others.
// A rank that dies is noticed by mpirun, which ends the job; a rank that hangs, or one that left
// the loop early through a path that skipped a collective, is not: the others would wait in
// their next collective forever. Every collective runs inside a Scope; a thread checks a few
// times a second whether the current one has lasted longer than runtime.collective_timeout_s,
// and if so prints which rank waited in what and ends the job (dist::abort_job), so every rank
// exits non-zero within the timeout and never hangs.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace seqtrain::dist {

class CollectiveWatchdog {
 public:
  CollectiveWatchdog(int rank, int world, double timeout_s);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;
  void set_timeout(double seconds) { timeout_s_.store(seconds); }
  double timeout() const { return timeout_s_.load(); }

  // Marks a collective in progress for its lifetime; `what` must be a string literal.
  class Scope {
   public:
    Scope(CollectiveWatchdog& w, const char* what);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveWatchdog& w_;
  };

 private:
  void watch();
  const int rank_, world_;
  std::atomic<double> timeout_s_;
  std::atomic<int64_t> entered_ns_{0};  // steady-clock time the current collective began; 0: none
  std::atomic<const char*> what_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace seqtrain::dist
