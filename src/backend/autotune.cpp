// Autotuner: see autotune.h.
#include "backend/autotune.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/isa.h"
#include "core/error.h"

namespace seqtrain {

Autotuner::Autotuner(Timer timer, int runs) : timer_(std::move(timer)), runs_(runs < 1 ? 1 : runs) {}

double Autotuner::wall_clock_ms(const TuneCandidate& c, int runs) {
  using Clock = std::chrono::steady_clock;
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    c.run();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

double Autotuner::time_once(const std::string& key, const TuneCandidate& c) const {
  return timer_ ? timer_(key, c) : wall_clock_ms(c, runs_);
}

std::string Autotuner::choose(const std::string& key, const std::vector<TuneCandidate>& candidates,
                              const std::function<void()>& after_warmup) {
  ST_CHECK(!candidates.empty(), "autotune: no candidates for {}", key);
  auto it = decisions_.find(key);
  if (it != decisions_.end()) {
    for (const auto& c : candidates)
      if (c.name == it->second.choice) return c.name;
    // A remembered choice that is not a candidate here (e.g. an old cache): decide again.
    decisions_.erase(it);
  }
  TuneDecision d;
  d.key = key;
  if (candidates.size() == 1) {
    d.choice = candidates[0].name;
    d.source = "only";
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    if (!timer_) {
      for (const auto& c : candidates) c.run();
      if (after_warmup) after_warmup();
    }
    std::vector<double> ms(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) ms[i] = time_once(key, candidates[i]);
    // One timed run each keeps the cost low; a close call (within kCloseCall of the fastest) is
    // timed once more so noise cannot flip it.
    const double first_best = *std::min_element(ms.begin(), ms.end());
    const auto close = [&](double t) { return t <= first_best * kCloseCall; };
    if (std::count_if(ms.begin(), ms.end(), close) > 1)
      for (size_t i = 0; i < candidates.size(); ++i)
        if (close(ms[i])) ms[i] = std::min(ms[i], time_once(key, candidates[i]));
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < candidates.size(); ++i) {
      d.timings_ms.emplace_back(candidates[i].name, ms[i]);
      if (ms[i] < best) {  // strict: ties keep the earlier candidate
        best = ms[i];
        d.choice = candidates[i].name;
      }
    }
    if (d.choice.empty()) d.choice = candidates[0].name;  // every timing NaN
    d.source = "timed";
    tuning_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  decisions_[key] = d;
  order_.push_back(d);
  return d.choice;
}

std::string Autotuner::export_json() const {
  nlohmann::json j;
  j["version"] = 1;
  j["machine"] = machine_id();
  j["decisions"] = nlohmann::json::object();
  for (const auto& [key, d] : decisions_) {
    nlohmann::json e;
    e["choice"] = d.choice;
    e["timings_ms"] = nlohmann::json::object();
    for (const auto& [name, ms] : d.timings_ms) e["timings_ms"][name] = ms;
    j["decisions"][key] = e;
  }
  return j.dump(2);
}

size_t Autotuner::import_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("autotune cache is not valid JSON: {}", e.what());
  }
  ST_CHECK(j.is_object() && j.value("version", 0) == 1 && j.contains("decisions") && j["decisions"].is_object(),
           "autotune cache: expected {{\"version\": 1, \"machine\": ..., \"decisions\": {{...}}}}");
  if (j.value("machine", std::string()) != machine_id()) return 0;
  size_t n = 0;
  for (auto& [key, e] : j["decisions"].items()) {
    ST_CHECK(e.is_object() && e.contains("choice") && e["choice"].is_string(),
             "autotune cache: decision '{}' has no \"choice\" string", key);
    TuneDecision d;
    d.key = key;
    d.choice = e["choice"].get<std::string>();
    if (e.contains("timings_ms") && e["timings_ms"].is_object())
      for (auto& [name, ms] : e["timings_ms"].items())
        if (ms.is_number()) d.timings_ms.emplace_back(name, ms.get<double>());
    d.source = "cache";
    decisions_[key] = d;
    order_.push_back(d);
    ++n;
  }
  return n;
}

std::string Autotuner::log_line(const TuneDecision& d) {
  std::string s = "autotune: " + d.key + " -> " + d.choice;
  if (d.source == "cache") s += " (from cache";
  else if (d.source == "only") s += " (only candidate";
  else s += " (timed";
  for (size_t i = 0; i < d.timings_ms.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", d.timings_ms[i].second);
    s += (i ? ", " : ": ") + d.timings_ms[i].first + " " + buf + " ms";
  }
  return s + ")";
}

std::vector<std::string> Autotuner::log_lines() const {
  std::vector<std::string> out;
  for (const auto& d : order_) out.push_back(log_line(d));
  return out;
}

std::string Autotuner::machine_id() {
  std::string model = "unknown-cpu";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) model = line.substr(p + 2);
      break;
    }
  return model + " / " + std::to_string(cpu_threads()) + " threads / " + isa_name(active_isa());
}

}  // namespace seqtrain
