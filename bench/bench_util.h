// What the step benchmarks (bench_step, bench_gpt) measure a run with: wall milliseconds, the
// median, peak RSS, involuntary context switches (how often other processes took our cores: a
// quiet machine shows a handful), the load average, and a timed loop of training steps.
#pragma once
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "train/step.h"

namespace seqtrain::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The process's CPU time in ms, all threads summed. With one thread it times a step on a machine
// others are busy on (the wall clock counts what the scheduler gave them; this does not).
inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports kilobytes
}

inline long involuntary_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nivcsw;
}

inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// warmup + steps runs of one training step on the same batch, seed i for step i.
struct StepTimes {
  std::vector<double> ms;  // the timed steps (after warm-up)
  double first_ms = 0;     // step 0, warm-up included (first-touch, tuning)
  long switches = 0;       // involuntary context switches during the timed steps
};

// cpu_clock: time with process_cpu_ms() instead of the wall clock.
inline StepTimes time_steps(TrainStep& step, const Tensor& x, const Tensor& y, int warmup, int steps,
                            bool cpu_clock = false) {
  StepTimes r;
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) r.switches = involuntary_switches();
    const auto t0 = Clock::now();
    const double c0 = cpu_clock ? process_cpu_ms() : 0;
    step.run(x, y, static_cast<uint64_t>(i));
    const double t = cpu_clock ? process_cpu_ms() - c0 : ms_since(t0);
    if (i == 0) r.first_ms = t;
    if (i >= warmup) r.ms.push_back(t);
  }
  r.switches = involuntary_switches() - r.switches;
  return r;
}

}  // namespace seqtrain::bench
