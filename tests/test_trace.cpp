// The tracer (issue 37, part 1): spans only inside a window, nesting per thread, the cap; and
// through the binary, `train --profile`: trace.json parses as a Chrome trace, its spans nest on
// every lane, the spans inside each traced micro-batch cover at least 95% of its time, a 100-step
// trace of a GPT stays far under 20 MB, a run without --profile writes no trace, and tracing
// changes no logged loss (the spans only watch).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/trace.h"
#include "test_trainer_util.h"

namespace seqtrain::testing {
namespace {
using namespace cli;

TEST(Trace, SpansAreRecordedOnlyInsideTheWindowAndNest) {
  { ST_TRACE("before"); }
  trace::Window w;
  w.start();
  {
    ST_TRACE("outer", "test", [] { return trace::shape_args({2, 3}, 1); });
    { ST_TRACE("inner"); }
    std::thread([] {
      trace::set_thread_name("helper");
      ST_TRACE("other thread");
    }).join();
  }
  const std::vector<trace::Event> ev = w.stop();
  { ST_TRACE("after"); }
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_STREQ(ev[0].name, "outer");  // parents first at equal starts
  EXPECT_EQ(ev[0].args, R"({"shape":[2,3],"layer":1})");
  std::map<std::string, const trace::Event*> by;
  for (const auto& e : ev) by[e.name] = &e;
  EXPECT_LE(by["outer"]->t0_ns, by["inner"]->t0_ns);
  EXPECT_GE(by["outer"]->t1_ns, by["inner"]->t1_ns);
  EXPECT_NE(by["other thread"]->tid, by["outer"]->tid);
  const nlohmann::json j = nlohmann::json::parse(trace::chrome_trace_json(ev));
  int lanes = 0;
  for (const auto& e : j["traceEvents"]) lanes += e["ph"] == "M" && e["args"]["name"] == "helper";
  EXPECT_EQ(lanes, 1);
}

TEST(Trace, TheWindowKeepsAtMostItsCap) {
  trace::Window w(10);
  w.start();
  for (int i = 0; i < 25; ++i) ST_TRACE("span");
  const auto ev = w.stop();
  EXPECT_EQ(ev.size(), 10u);
  EXPECT_EQ(w.dropped(), 15);
}

// Checks the Chrome trace of a run: nesting per lane and the micro-batches' coverage. Returns
// the per-name span counts.
std::map<std::string, int> check_trace(const nlohmann::json& j, double* coverage) {
  std::map<int, std::vector<std::pair<double, double>>> lanes;
  std::map<std::string, int> names;
  std::vector<std::pair<double, double>> micro;
  std::vector<std::tuple<double, double, int>> all;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double t0 = e.at("ts"), t1 = t0 + e.at("dur").get<double>();
    lanes[e.at("tid")].push_back({t0, t1});
    names[e.at("name")]++;
    if (e.at("name") == "train.micro_batch") micro.push_back({t0, t1});
    all.push_back({t0, t1, e.at("tid")});
  }
  for (auto& [tid, spans] : lanes) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<double> open;  // ends of the enclosing spans
    for (const auto& [t0, t1] : spans) {
      while (!open.empty() && open.back() <= t0 + 1e-3) open.pop_back();
      EXPECT_TRUE(open.empty() || t1 <= open.back() + 1e-3) << "lane " << tid << ": a span [" << t0 << ", " << t1
                                                            << "] overlaps its parent's end " << open.back();
      open.push_back(t1);
    }
  }
  // Each micro-batch's direct children on its lane: the union of what they cover.
  double covered = 0, total = 0;
  const int train_tid = [&] {
    for (const auto& e : j.at("traceEvents"))
      if (e.at("ph") == "X" && e.at("name") == "train.micro_batch") return e.at("tid").get<int>();
    return -1;
  }();
  for (const auto& [m0, m1] : micro) {
    total += m1 - m0;
    std::vector<std::pair<double, double>> kids;
    for (const auto& [t0, t1, tid] : all)
      if (tid == train_tid && t0 >= m0 && t1 <= m1 && !(t0 == m0 && t1 == m1)) kids.push_back({t0, t1});
    std::sort(kids.begin(), kids.end());
    double end = m0;
    for (const auto& [t0, t1] : kids) {
      if (t1 <= end) continue;
      covered += t1 - std::max(t0, end);
      end = t1;
    }
  }
  *coverage = total > 0 ? covered / total : 0;
  return names;
}

std::vector<double> train_losses(const std::string& run) {
  std::vector<double> out;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["split"] == "train") out.push_back(j["loss"]);
  }
  return out;
}

TEST(Trace, ProfileWritesAChromeTraceWhoseSpansNestAndCoverTheSteps) {
  TempDir dir;
  const std::string traced = dir / "traced", plain = dir / "plain";
  const std::string job = "train " + example_config() + kSmall + " --set train.epochs=2 --quiet";
  Result r = run_seqtrain(job + " --out " + traced + " --profile=30 --set data.workers=1");
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_TRUE(fs::exists(traced + "/trace.json"));
  const nlohmann::json j = nlohmann::json::parse(slurp(traced + "/trace.json"));
  double coverage = 0;
  const auto names = check_trace(j, &coverage);
  EXPECT_EQ(names.at("train.micro_batch"), 30);
  for (const char* n : {"data.wait", "step.forward", "step.backward", "step.optimizer", "rnn.layer.forward",
                        "rnn.layer.backward", "linear.forward", "loader.fill_batch"})
    EXPECT_GT(names.count(n) ? names.at(n) : 0, 0) << n << " is missing from the trace";
  EXPECT_GE(coverage, 0.95) << "the spans inside the traced micro-batches cover too little of them";
  // Tracing only watches: the same job untraced logs the same losses, and writes no trace.
  r = run_seqtrain(job + " --out " + plain + " --set data.workers=1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(plain + "/trace.json"));
  EXPECT_EQ(train_losses(traced), train_losses(plain));
}

TEST(Trace, AHundredStepTraceOfAGptStaysSmall) {
  TempDir dir;
  std::string text;
  for (int i = 0; text.size() < 60000; ++i) text += "ROMEO: the night is sweet and fair, my lord " + std::to_string(i % 97) + ".\n";
  const std::string data = write_file(dir, "play.txt", text);
  Result r = run_seqtrain("train " + source_dir() + "/examples/shakespeare_gpt.yaml --out " + (dir / "gpt") +
                          " --set data.path=" + data +
                          " --set train.max_steps=110 --set train.eval_every=0u --set train.schedule.warmup_steps=5"
                          " --set runtime.threads=1 --quiet --profile=100");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto bytes = fs::file_size(dir / "gpt/trace.json");
  EXPECT_LT(bytes, 20u << 20);
  double coverage = 0;
  const auto names = check_trace(nlohmann::json::parse(slurp(dir / "gpt/trace.json")), &coverage);
  EXPECT_EQ(names.at("train.micro_batch"), 100);
  EXPECT_GT(names.count("attention.forward") ? names.at("attention.forward") : 0, 0);
  EXPECT_GE(coverage, 0.95);
}

TEST(Trace, ATraceThatCannotBeWrittenIsAClearErrorBeforeTraining) {
  TempDir dir;
  const std::string out = dir / "run";
  fs::create_directories(out + "/trace.json");  // a directory where the trace goes
  Result r = run_seqtrain("train " + example_config() + kSmall + " --set train.epochs=1 --quiet --profile --out " + out);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(out + "/trace.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runtime.profile"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out + "/metrics.jsonl")) << "training started";
}

}  // namespace
}  // namespace seqtrain::testing
