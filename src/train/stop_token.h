// StopToken: how a caller asks a running training loop to stop. The loop checks it after
// every micro-batch, finishes the step, writes `last` and returns, so the run can be resumed.
// The CLI's signal watcher is one caller (it passes the signal number); a library caller such
// as the training service is another (it passes 0). Passed in TrainOptions, never a global,
// so two runs in one process stop independently.
#pragma once
#include <atomic>

namespace seqtrain {

class StopToken {
 public:
  // Asks the loop to stop; the first request wins. `signal` is the signal number, 0 when a
  // library caller asks.
  void request(int signal = 0) {
    int expected = kNone;
    code_.compare_exchange_strong(expected, signal);
  }
  bool requested() const { return code_.load() != kNone; }
  int signal() const { const int c = code_.load(); return c == kNone ? 0 : c; }
  void reset() { code_.store(kNone); }

  // A loop that watches this token holds it armed; the signal watcher ends the process the
  // usual way when a signal finds no armed loop (or on the second signal).
  void arm(bool on) { armed_.store(on); }
  bool armed() const { return armed_.load(); }

 private:
  static constexpr int kNone = -1;
  std::atomic<int> code_{kNone};
  std::atomic<bool> armed_{false};
};

}  // namespace seqtrain
