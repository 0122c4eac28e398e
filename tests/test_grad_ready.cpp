// The backward's GradReady reports (nn/grad_ready.h) that the overlap's buckets start on: for the
// LSTM forecaster and the GPT, each reported tail [offset, end) of the gradient buffer already
// holds its final values (bit for bit what the whole backward leaves there), the reports come
// last layer first (offsets never grow), and there is one per layer or block at least, so the
// buckets really start under the backward.
#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"
#include "models/model.h"
#include "nn/grad_ready.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

struct Snapshots : GradReadyHook {
  explicit Snapshots(const ParamStore& p) : params(p) {}
  const ParamStore& params;
  std::vector<size_t> offsets;
  std::vector<std::vector<float>> tails;
  void ready_from(size_t offset) override {
    offsets.push_back(offset);
    tails.emplace_back(params.grads() + offset, params.grads() + params.size());
  }
};

void expect_final_tails(Model& m, const Tensor& x, const Tensor& y, LossKind loss, size_t min_reports) {
  Rng rng(5);
  m.init(rng);
  auto opt = make_optimizer(OptimizerOptions{});
  auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 1e-3});
  // Two micro-batches an update: after the first, the gradients stay for the comparison.
  TrainStep step(m, *opt, *sched, StepOptions{loss, {}, 1.0, 2});
  Snapshots hook(m.params());
  {
    const GradReadyScope scope(&hook);
    step.run(x, y, 9);
  }
  ASSERT_GE(hook.offsets.size(), min_reports);
  const float* g = m.params().grads();
  const size_t n = m.params().size();
  for (size_t i = 0; i < hook.offsets.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(hook.offsets[i], hook.offsets[i - 1]) << "report " << i << " grew the tail's start";
    }
    const size_t at = hook.offsets[i];
    ASSERT_LT(at, n);
    const std::vector<float> final_tail(g + at, g + n);
    EXPECT_EQ(hook.tails[i], final_tail) << "report " << i << ": [" << at << ", " << n << ") changed after it";
  }
}

TEST(GradReady, LstmForecasterReportsFinalTailsHeadThenEachLayer) {
  ModelSpec s;
  s.type = "lstm";
  s.input_size = 3;
  s.lookback = 6;
  s.hidden = 8;
  s.layers = 3;
  s.dropout = 0.1f;
  s.output_size = 2;
  auto m = make_model(s);
  const int64_t B = 4;
  Rng rng(1);
  std::vector<float> x(B * 6 * 3), y(B * 2);
  for (float& v : x) v = rng.normal();
  for (float& v : y) v = rng.normal();
  expect_final_tails(*m, Tensor(x.data(), {B, 6, 3}), Tensor(y.data(), {B, 2}), LossKind::mse, 1 + 3);
}

TEST(GradReady, GptReportsFinalTailsLnFThenEachBlock) {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 11;
  s.lookback = s.output_size = 8;
  s.input_size = 1;
  s.layers = 3;
  s.heads = 2;
  s.hidden = 12;
  s.dropout = 0.1f;
  auto m = make_model(s);
  const int64_t B = 3, T = 8;
  Rng rng(2);
  std::vector<int64_t> x(B * T), y(B * T);
  for (auto& v : x) v = static_cast<int64_t>(rng.below(11));
  for (auto& v : y) v = static_cast<int64_t>(rng.below(11));
  expect_final_tails(*m, Tensor(x.data(), {B, T}, DType::i64), Tensor(y.data(), {B, T}, DType::i64),
                     LossKind::cross_entropy, 1 + 3);
}

}  // namespace
}  // namespace seqtrain::testing
