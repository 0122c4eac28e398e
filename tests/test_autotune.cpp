// Autotune: decisions from injected timings are deterministic (ties to the first candidate),
// remembered per shape, exported/imported as JSON per machine, logged; an autotuned RNN runs the
// chosen implementation per layer and its gradients are untouched by the timing runs.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/autotune.h"
#include "models/forecaster.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

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

TEST(Autotune, DefaultTimerWarmsUpThenTimesBestOfRuns) {
  Autotuner t({}, 3);
  int ran = 0;
  t.choose("k", cands(&ran));
  EXPECT_EQ(ran, 8);  // (1 warm-up + 3 timed) per candidate
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
  Forecaster plain(spec);
  spec.autotune = true;
  Forecaster tuned(spec);
  ASSERT_NE(tuned.autotuner(), nullptr);
  EXPECT_EQ(plain.autotuner(), nullptr);
  tuned.autotuner()->set_timer([](const std::string& key, const TuneCandidate& c) {
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
    m->forward(Tensor(x.data(), {N, T, C}), arena, true);
    m->backward(Tensor(dy.data(), {N, OUT}), arena);
  }
  EXPECT_EQ(tuned.rnn().layer_impl(0), RnnImpl::onednn);
  EXPECT_EQ(tuned.rnn().layer_impl(1), RnnImpl::fused);
  std::vector<float> a(plain.params().grads(), plain.params().grads() + plain.params().size());
  std::vector<float> b(tuned.params().grads(), tuned.params().grads() + tuned.params().size());
  EXPECT_LT(rel_err(b, a), 1e-5);
  const auto lines = tuned.autotuner()->log_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("lstm T=6 N=4 C=3 H=8 D=1 fp32 -> onednn"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace seqtrain::testing
