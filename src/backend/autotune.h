// Autotuner: the cuDNN-benchmark equivalent. For a shape key it warms every candidate up once,
// times each (the best of `runs` runs), times the close calls
// (within 10% of the fastest) once more, keeps the fastest
// and remembers the decision, so later layers and steps with the same key reuse it without
// timing anything. Ties go to the candidate listed first, so equal timings always give the same
// choice.
//
// The timing function is injectable: a test passes one that returns fixed numbers and checks
// the decisions. Decisions export to and import from JSON, tagged with machine_id(); imported
// decisions for another machine are ignored (timings do not carry across CPUs or thread counts).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace seqtrain {

struct TuneCandidate {
  std::string name;
  std::function<void()> run;  // one complete execution of the candidate
};

struct TuneDecision {
  std::string key;
  std::string choice;
  std::vector<std::pair<std::string, double>> timings_ms;  // empty when imported or single candidate
  std::string source;  // "timed", "cache" (imported), "only" (a single candidate)
};

class Autotuner {
 public:
  // Returns the time of one candidate in milliseconds. The default runs it `runs` times and
  // returns the fastest wall-clock time (choose() has warmed it up before).
  using Timer = std::function<double(const std::string& key, const TuneCandidate& candidate)>;

  // One timed run per candidate by default: the tuner runs inside the first step, and issue 13
  // bounds its cost at 2% of a quickstart; close calls get a second timing instead.
  explicit Autotuner(Timer timer = {}, int runs = 1);
  void set_timer(Timer timer) { timer_ = std::move(timer); }

  // The chosen candidate's name for key: the remembered decision, or times the candidates.
  // The default timer first runs every candidate once (warm-up: primitive creation, buffer
  // sizing), then calls after_warmup (the caller's chance to settle its buffers), then times.
  std::string choose(const std::string& key, const std::vector<TuneCandidate>& candidates,
                     const std::function<void()>& after_warmup = {});
  bool has(const std::string& key) const { return decisions_.count(key) != 0; }

  // {"version": 1, "machine": "...", "decisions": {key: {"choice": ..., "timings_ms": {...}}}}
  std::string export_json() const;
  // Loads decisions saved by export_json. Returns how many were taken (0 when the file was
  // written on another machine_id); throws seqtrain::Error on malformed JSON.
  size_t import_json(const std::string& text);

  // Every decision in the order made, and one human-readable log line per decision, e.g.
  // "autotune: lstm T=150 N=256 C=8 H=128 D=1 fp32 -> fused (fused 10.2 ms, onednn 31.0 ms)".
  const std::vector<TuneDecision>& decisions() const { return order_; }
  // Wall-clock time spent timing candidates so far (the autotuner's cost to the run).
  double tuning_ms() const { return tuning_ms_; }
  static std::string log_line(const TuneDecision& d);
  std::vector<std::string> log_lines() const;

  // CPU model name, thread count and kernel ISA level: the scope in which timings are comparable.
  static std::string machine_id();
  static double wall_clock_ms(const TuneCandidate& c, int runs);

 private:
  static constexpr double kCloseCall = 1.10;
  double time_once(const std::string& key, const TuneCandidate& candidate) const;

  Timer timer_;
  int runs_;
  std::map<std::string, TuneDecision> decisions_;
  std::vector<TuneDecision> order_;
  double tuning_ms_ = 0;
};

}  // namespace seqtrain
