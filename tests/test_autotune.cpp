// Autotune: decisions from injected timings are deterministic (ties to the first candidate),
// remembered per shape, exported/imported as JSON per machine, logged; an autotuned RNN runs the
// chosen implementation per layer and its gradients are untouched by the timing runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "backend/autotune.h"
#include "models/forecaster.h"
#include "model_pass.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

Autotuner::Timer fixed(std::map<std::string, double> ms, int* calls = nullptr) {
  return [ms, calls](const std::string&, const TuneCandidate& c) {
    if (calls) ++*calls;
    return ms.at(c.name);
  };
}

std::vector<TuneCandidate> cands(int* ran = nullptr) {
  return {{"fused", [ran] { if (ran) ++*ran; }}, {"onednn", [ran] { if (ran) ++*ran; }}};
}

TEST(Autotune, PicksFastestDeterministicallyAndRemembersPerKey) {
  for (int rep = 0; rep < 3; ++rep) {
    int calls = 0;
    Autotuner t(fixed({{"fused", 2.0}, {"onednn", 1.5}}, &calls));
    EXPECT_EQ(t.choose("k1", cands()), "onednn");
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(t.choose("k1", cands()), "onednn");
    EXPECT_EQ(calls, 2) << "a decided key is not timed again";
    ASSERT_EQ(t.decisions().size(), 1u);
    EXPECT_EQ(t.decisions()[0].timings_ms.size(), 2u);
  }
  Autotuner tie(fixed({{"fused", 1.0}, {"onednn", 1.0}}));
  EXPECT_EQ(tie.choose("k", cands()), "fused") << "ties go to the first candidate";
  Autotuner one(fixed({}));
  EXPECT_EQ(one.choose("k", {{"fused", [] {}}}), "fused");
  EXPECT_EQ(one.decisions()[0].source, "only");
}

TEST(Autotune, DefaultTimerWarmsUpEveryCandidateThenTimesBestOfRuns) {
  // fused returns at once and onednn sleeps 20 ms: never a close call, so each candidate runs
  // one warm-up and `runs` timed runs, and the caller's hook runs between the two phases.
  for (int runs : {1, 3}) {
    Autotuner t({}, runs);
    int fused = 0, onednn = 0, hook = -1;
    std::vector<TuneCandidate> c{{"fused", [&] { ++fused; }},
                                 {"onednn", [&] { ++onednn; std::this_thread::sleep_for(std::chrono::milliseconds(20)); }}};
    EXPECT_EQ(t.choose("k", c, [&] { hook = fused + onednn; }), "fused");
    EXPECT_EQ(hook, 2) << "after one warm-up each";
    EXPECT_EQ(fused, 1 + runs);
    EXPECT_EQ(onednn, 1 + runs);
  }
}

TEST(Autotune, CloseCallsAreTimedTwiceAndKeepTheirBest) {
  // Within 10% of the fastest: timed again and the minimum kept; further away: timed once.
  std::map<std::string, int> calls;
  std::map<std::string, std::vector<double>> seq{{"fused", {1.00, 1.00}}, {"fused:avx2", {1.05, 0.90}}, {"onednn", {2.0}}};
  Autotuner t([&](const std::string&, const TuneCandidate& c) { return seq.at(c.name).at(calls[c.name]++); });
  std::vector<TuneCandidate> c{{"fused", [] {}}, {"fused:avx2", [] {}}, {"onednn", [] {}}};
  EXPECT_EQ(t.choose("k", c), "fused:avx2") << "its second timing wins the close call";
  EXPECT_EQ(calls["fused"], 2);
  EXPECT_EQ(calls["fused:avx2"], 2);
  EXPECT_EQ(calls["onednn"], 1) << "a clear loser is not timed again";
  EXPECT_DOUBLE_EQ(t.decisions()[0].timings_ms[1].second, 0.90);
}

TEST(Autotune, JsonRoundTripPerMachineAndLogLines) {
  Autotuner t(fixed({{"fused", 3.0}, {"onednn", 4.0}}));
  t.choose("lstm T=10 N=4 C=3 H=8 D=1 fp32", cands());
  const std::string js = t.export_json();
  EXPECT_NE(js.find(Autotuner::machine_id()), std::string::npos);

  int calls = 0;
  Autotuner u(fixed({{"fused", 9.0}, {"onednn", 1.0}}, &calls));
  EXPECT_EQ(u.import_json(js), 1u);
  EXPECT_EQ(u.choose("lstm T=10 N=4 C=3 H=8 D=1 fp32", cands()), "fused") << "the cached decision wins";
  EXPECT_EQ(calls, 0);
  ASSERT_EQ(u.log_lines().size(), 1u);
  EXPECT_NE(u.log_lines()[0].find("-> fused (from cache"), std::string::npos) << u.log_lines()[0];
  EXPECT_NE(t.log_lines()[0].find("-> fused (timed: fused 3.000 ms, onednn 4.000 ms)"), std::string::npos)
      << t.log_lines()[0];

  std::string other = js;
  other.replace(other.find(Autotuner::machine_id()), Autotuner::machine_id().size(), "another cpu / 64 threads");
  Autotuner v;
  EXPECT_EQ(v.import_json(other), 0u) << "another machine's timings are ignored";
  EXPECT_THROW(v.import_json("{not json"), Error);
  EXPECT_THROW(v.import_json("{\"version\": 2}"), Error);
}

// An autotuned forecaster with timings that favour oneDNN for layer 0's shape and the fused
// kernels for layer 1's: each layer runs its winner, and the gradients match an untuned model.
TEST(Autotune, ForecasterLayersRunTheirWinnersAndGradientsAreUntouched) {
  const int64_t N = 4, T = 6, C = 3, H = 8, OUT = 2;
  ModelSpec spec{"lstm", C, T, H, 2, false, 0.f, OUT};
  auto tuner = std::make_shared<Autotuner>();
  Forecaster plain(spec, ModelEnv{tuner});  // autotune off: the lent tuner is not used
  spec.autotune = true;
  Forecaster tuned(spec, ModelEnv{tuner});
  tuner->set_timer([](const std::string& key, const TuneCandidate& c) {
    const bool layer0 = key.find(" C=3 ") != std::string::npos;
    return (c.name == "onednn") == layer0 ? 1.0 : 2.0;
  });
  Rng rng(8);
  plain.init(rng);
  std::memcpy(tuned.params().params(), plain.params().params(), plain.params().size() * sizeof(float));
  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  for (Forecaster* m : {&plain, &tuned}) {
    Arena arena;
    m->params().zero_grad();
    ModelPass(*m, arena, true).forward(Tensor(x.data(), {N, T, C}));
    ModelPass(*m, arena, true).backward(Tensor(dy.data(), {N, OUT}));
  }
  EXPECT_EQ(tuned.rnn().layer_impl(0), "onednn");
  EXPECT_EQ(tuned.rnn().layer_impl(1), "fused");
  std::vector<float> a(plain.params().grads(), plain.params().grads() + plain.params().size());
  std::vector<float> b(tuned.params().grads(), tuned.params().grads() + tuned.params().size());
  EXPECT_LT(rel_err(b, a), 1e-5);
  const auto lines = tuner->log_lines();
  ASSERT_EQ(lines.size(), 2u) << "the tuned model's two layer shapes, none from the untuned one";
  EXPECT_NE(lines[0].find("lstm T=6 N=4 C=3 H=8 D=1 fp32 -> onednn"), std::string::npos) << lines[0];
}


// An epoch's short last batch keeps the full batch's choices; a longer batch or sequence is
// tuned anew.
TEST(Autotune, AShortLastBatchReusesTheFullBatchDecision) {
  const int64_t T = 5, C = 3, H = 8, OUT = 2;
  ModelSpec spec{"gru", C, T, H, 1, false, 0.f, OUT};
  spec.autotune = true;
  auto tuner = std::make_shared<Autotuner>();
  Forecaster m(spec, ModelEnv{tuner});
  tuner->set_timer([](const std::string&, const TuneCandidate& c) { return c.name == "onednn" ? 1.0 : 2.0; });
  Rng rng(3);
  m.init(rng);
  auto step = [&](int64_t n) {
    std::vector<float> x(n * T * C, 0.5f), dy(n * OUT, 0.1f);
    Arena arena;
    ModelPass(m, arena, true).forward(Tensor(x.data(), {n, T, C}));
    ModelPass(m, arena, true).backward(Tensor(dy.data(), {n, OUT}));
  };
  step(8);
  step(3);
  step(8);
  EXPECT_EQ(tuner->decisions().size(), 1u) << "N=3 after N=8 is not timed";
  EXPECT_EQ(m.rnn().layer_impl(0), "onednn");
  step(12);
  ASSERT_EQ(tuner->decisions().size(), 2u);
  EXPECT_NE(tuner->decisions()[1].key.find("N=12"), std::string::npos);
}

}  // namespace
}  // namespace seqtrain::testing
