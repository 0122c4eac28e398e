// The objectives (train/objective.h) and the step's (sum, count) accumulation: per-objective
// loss sums, counts and accuracy against references written here; each objective's gradient
// of the sum against central differences of its own forward(); and gradient accumulation over
// micro-batches of unequal size (8, 8, 8, 3 and 3, 8, 8, 8) giving the gradient and loss of the
// single 27-sample batch, for the forecaster (mse), a classifier and a char LM (cross-entropy).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/rng.h"
#include "models/char_lm.h"
#include "models/forecaster.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/objective.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

LossOptions huber(float delta) {
  LossOptions o;
  o.huber_delta = delta;
  return o;
}

TEST(Objective, RegressionSumsEveryElement) {
  std::vector<float> p = {1.f, 2.f, -1.f, 0.5f, 3.f, 0.f}, y = {0.f, 2.5f, 1.f, 0.5f, 0.f, -2.f};
  Tensor pred(p.data(), {3, 2}), target(y.data(), {3, 2});
  double sq = 0, ab = 0, hu = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = double(p[i]) - y[i], a = std::abs(d);
    sq += d * d;
    ab += a;
    hu += a < 1.0 ? 0.5 * d * d : a - 0.5;
  }
  const std::pair<LossKind, double> cases[] = {{LossKind::mse, sq}, {LossKind::mae, ab}, {LossKind::huber, hu}};
  for (const auto& [kind, want] : cases) {
    auto obj = make_objective(kind, huber(1.f), ObjectiveTask::forecast);
    const ObjectiveSum s = obj->forward(pred, batch_of_targets(target));
    EXPECT_NEAR(s.loss, want, 1e-12) << obj->name();
    EXPECT_EQ(s.count, 6) << obj->name();  // B * outputs elements, as torch's mean divides by
    EXPECT_EQ(s.correct, 0);
    EXPECT_FALSE(obj->has_accuracy());
    // The mean is today's loss number.
    EXPECT_FLOAT_EQ(static_cast<float>(s.mean()), loss_forward(kind, pred, target, huber(1.f))) << obj->name();
  }
}

// -log softmax(z)[t] of one row, in double.
double ce_row(const float* z, int64_t C, int64_t t) {
  double m = z[0], s = 0;
  for (int64_t j = 1; j < C; ++j) m = std::max(m, double(z[j]));
  for (int64_t j = 0; j < C; ++j) s += std::exp(double(z[j]) - m);
  return m + std::log(s) - z[t];
}

TEST(Objective, ClassificationCountsLabelsAndCorrectOnes) {
  // Rows' largest logits: 0, 2, 1, 1. Labels: 0 (right), 1 (wrong), 1 (right), ignored.
  std::vector<float> z = {3, 1, 0, 0, 1, 2, -1, 5, 4, 0, 9, 1};
  std::vector<int64_t> t = {0, 1, 1, -100};
  auto obj = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify);
  const ObjectiveSum s = obj->forward(Tensor(z.data(), {4, 3}), batch_of_targets(Tensor(t.data(), {4}, DType::i64)));
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.correct, 2);
  EXPECT_NEAR(s.loss, ce_row(&z[0], 3, 0) + ce_row(&z[3], 3, 1) + ce_row(&z[6], 3, 1), 1e-9);
  EXPECT_DOUBLE_EQ(s.accuracy(), 2.0 / 3.0);
  EXPECT_TRUE(obj->has_accuracy());
  // Labels are int64, one per sample: float values or a [B, T] shape are refused, not cast.
  std::vector<float> yf = {2, 0, 1, 1};
  EXPECT_CONTAINS(error_of([&] { obj->forward(Tensor(z.data(), {4, 3}), batch_of_targets(Tensor(yf.data(), {4}))); }),
                  "not int64 class labels");
  // A batch without targets, or with a loss mask no objective here reads, is refused by name.
  EXPECT_CONTAINS(error_of([&] { obj->forward(Tensor(z.data(), {4, 3}), Batch{}); }), "holds no targets");
  Batch masked = batch_of_targets(Tensor(t.data(), {4}, DType::i64));
  masked.loss_mask = Tensor(yf.data(), {4});
  EXPECT_CONTAINS(error_of([&] { obj->forward(Tensor(z.data(), {4, 3}), masked); }), "loss mask");
}

TEST(Objective, NextTokenCountsEveryPosition) {
  const int64_t B = 2, T = 3, V = 4;
  Rng rng(3);
  auto z = randn(rng, B * T * V);
  std::vector<int64_t> labels = {1, 3, 0, 2, 2, 1};
  auto obj = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::next_token);
  const Tensor target(labels.data(), {B, T}, DType::i64);
  const ObjectiveSum s = obj->forward(Tensor(z.data(), {B, T, V}), batch_of_targets(target));
  EXPECT_EQ(s.count, B * T);
  double want = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < B * T; ++i) {
    want += ce_row(&z[i * V], V, labels[i]);
    correct += std::max_element(&z[i * V], &z[i * V] + V) - &z[i * V] == labels[i];
  }
  EXPECT_NEAR(s.loss, want, 1e-9);
  EXPECT_EQ(s.correct, correct);
  // Its mean is F.cross_entropy over the B*T rows: today's loss number.
  EXPECT_FLOAT_EQ(static_cast<float>(s.mean()),
                  loss_forward(LossKind::cross_entropy, Tensor(z.data(), {B, T, V}), target));
}

TEST(Objective, FactoryRefusesALossTheTaskCannotTake) {
  EXPECT_CONTAINS(error_of([] { make_objective(LossKind::mse, {}, ObjectiveTask::classify); }), "train.loss");
  EXPECT_CONTAINS(error_of([] { make_objective(LossKind::cross_entropy, {}, ObjectiveTask::forecast); }),
                  "train.loss");
  TrainConfig t;
  t.loss = "huber";
  EXPECT_EQ(make_objective(t, 0, 2)->task(), ObjectiveTask::forecast);
  t.loss = "cross_entropy";
  EXPECT_EQ(make_objective(t, 5, 1)->task(), ObjectiveTask::classify);
  EXPECT_EQ(make_objective(t, 5, 16)->task(), ObjectiveTask::next_token);
}

// backward(scale) against central differences of forward().loss, times scale.
void expect_gradient_of_sum(const Objective& obj, std::vector<float> p, const Shape& shape, const Tensor& target) {
  const double scale = 0.75;
  std::vector<float> g(p.size(), 123.f);
  obj.backward(Tensor(p.data(), shape), batch_of_targets(target), Tensor(g.data(), shape), scale);
  std::vector<double> pd(p.begin(), p.end());
  std::vector<float> pf(p.size());
  auto f = [&] {
    for (size_t i = 0; i < pd.size(); ++i) pf[i] = static_cast<float>(pd[i]);
    return scale * obj.forward(Tensor(pf.data(), shape), batch_of_targets(target)).loss;
  };
  const auto num = numgrad(pd, f, 1e-2);
  EXPECT_LT(rel_err(g, num), 2e-3) << obj.name();
  EXPECT_GT(rel_err(num, std::vector<double>(num.size(), 0.0)), 0.0) << obj.name();
}

TEST(Objective, GradientIsTheGradientOfTheSum) {
  Rng rng(11);
  const int64_t B = 5, O = 3;
  auto p = randn(rng, B * O, 1.5f), y = randn(rng, B * O);
  for (int64_t i = 0; i < B * O; ++i)  // keep |d| off the kinks (0 for mae, delta for huber)
    if (std::abs(p[i] - y[i]) < 0.05f || std::abs(std::abs(p[i] - y[i]) - 0.7f) < 0.05f) p[i] += 0.2f;
  Tensor ty(y.data(), {B, O});
  for (LossKind k : {LossKind::mse, LossKind::mae, LossKind::huber})
    expect_gradient_of_sum(*make_objective(k, huber(0.7f), ObjectiveTask::forecast), p, {B, O}, ty);

  const int64_t C = 4, T = 3;
  auto z = randn(rng, B * C, 2.f);
  std::vector<int64_t> labels = {0, 3, -100, 1, 2};
  expect_gradient_of_sum(*make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify), z, {B, C},
                         Tensor(labels.data(), {B}, DType::i64));
  auto zt = randn(rng, B * T * C, 2.f);
  std::vector<int64_t> tokens(B * T);
  for (auto& t : tokens) t = static_cast<int64_t>(rng.below(C));
  expect_gradient_of_sum(*make_objective(LossKind::cross_entropy, {}, ObjectiveTask::next_token), zt, {B, T, C},
                         Tensor(tokens.data(), {B, T}, DType::i64));
}

// An optimizer that changes nothing and keeps the gradients it was handed: the step's final,
// normalised gradient, with the model's weights left as they were for the next run.
class GradRecorder final : public Optimizer {
 public:
  GradRecorder() : Optimizer("recorder", {}, OptimizerOptions{}) {}
  void step(float* params, const float* grads, size_t n, double lr) override {
    begin_step(params, grads, n, lr);
    ++step_;
    grads_.assign(grads, grads + n);
  }
  std::vector<float> grads_;
};

// One training problem: a model, 27 samples of x and their target, and its objective.
struct Problem {
  std::unique_ptr<Model> model;
  std::unique_ptr<Objective> objective;
  std::vector<float> x;
  std::vector<float> yf;        // regression targets
  std::vector<int64_t> labels;  // class labels
  Shape x_tail, y_tail;         // shapes of one sample
  int64_t N = 27;
  std::vector<int64_t> len;     // each sample's valid steps (variable-length problems), else empty
  std::vector<uint8_t> padding;

  Tensor xs(int64_t begin, int64_t n) {
    Shape s{n};
    s.insert(s.end(), x_tail.begin(), x_tail.end());
    return Tensor(x.data() + begin * numel_of(x_tail), s);
  }
  Tensor ys(int64_t begin, int64_t n) {
    Shape s{n};
    s.insert(s.end(), y_tail.begin(), y_tail.end());
    if (!labels.empty()) return Tensor(labels.data() + begin * numel_of(y_tail), s, DType::i64);
    return Tensor(yf.data() + begin * numel_of(y_tail), s);
  }
  // Samples [begin, begin + n) as the loader builds them: with lengths and the padding mask.
  Batch batch(int64_t begin, int64_t n) {
    Batch b = batch_of(xs(begin, n));
    b.targets = ys(begin, n);
    if (len.empty()) return b;
    const int64_t T = x_tail[0];
    padding.assign(static_cast<size_t>(n * T), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t t = len[static_cast<size_t>(begin + i)]; t < T; ++t) padding[static_cast<size_t>(i * T + t)] = 1;
    b.lengths = Tensor(len.data() + begin, {n}, DType::i64);
    b.key_padding_mask = Tensor(padding.data(), {n, T}, DType::u8);
    return b;
  }
};

Problem forecaster_problem() {
  Problem p;
  p.model = std::make_unique<Forecaster>(ModelSpec{"lstm", 3, 6, 8, 1, false, 0.f, 2});
  p.objective = make_objective(LossKind::mse, {}, ObjectiveTask::forecast);
  Rng rng(21);
  p.model->init(rng);
  p.x = randn(rng, p.N * 6 * 3);
  p.yf = randn(rng, p.N * 2);
  p.x_tail = {6, 3};
  p.y_tail = {2};
  return p;
}

Problem classifier_problem() {
  Problem p;
  p.model = std::make_unique<Forecaster>(ModelSpec{"gru", 3, 6, 8, 1, false, 0.f, 4});
  p.objective = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify);
  Rng rng(22);
  p.model->init(rng);
  p.x = randn(rng, p.N * 6 * 3);
  for (int64_t i = 0; i < p.N; ++i) p.labels.push_back(static_cast<int64_t>(rng.below(4)));
  p.x_tail = {6, 3};
  p.y_tail = {};
  return p;
}

Problem char_lm_problem() {
  Problem p;
  ModelSpec s;
  s.type = "char_lstm";
  s.vocab_size = 7;
  s.embed_size = 4;
  s.hidden = 8;
  p.model = std::make_unique<CharLm>(s);
  p.objective = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::next_token);
  Rng rng(23);
  p.model->init(rng);
  const int64_t T = 5;
  for (int64_t i = 0; i < p.N * T; ++i) p.x.push_back(static_cast<float>(rng.below(7)));
  for (int64_t i = 0; i < p.N * T; ++i) p.labels.push_back(static_cast<int64_t>(rng.below(7)));
  p.x_tail = {T};
  p.y_tail = {T};
  return p;
}

struct Accumulated {
  std::vector<float> grads;
  double loss = 0;
  int64_t count = 0;
};

// One optimizer step over micro-batches of the given sizes (in order), through TrainStep.
Accumulated accumulate(Problem& p, const std::vector<int64_t>& sizes, LossScaler* scaler = nullptr) {
  GradRecorder rec;
  auto sched = make_schedule(ScheduleOptions{});
  StepOptions o;
  o.grad_clip = 0.0;
  o.grad_accum = static_cast<int64_t>(sizes.size());
  o.scaler = scaler;
  o.objective = p.objective.get();
  TrainStep step(*p.model, rec, *sched, o);
  int64_t begin = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const StepResult r = step.run(p.batch(begin, sizes[i]), 7);
    EXPECT_EQ(r.updated, i + 1 == sizes.size());
    begin += sizes[i];
  }
  Accumulated a;
  a.grads = rec.grads_;
  a.loss = step.take_loss(&a.count);
  return a;
}

void expect_unequal_micro_batches_match_one_batch(Problem p, int64_t targets_per_sample) {
  const Accumulated big = accumulate(p, {27});
  ASSERT_EQ(big.count, 27 * targets_per_sample);
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{8, 8, 8, 3}, std::vector<int64_t>{3, 8, 8, 8}}) {
    const Accumulated acc = accumulate(p, sizes);
    EXPECT_EQ(acc.count, big.count);
    EXPECT_LT(std::abs(acc.loss - big.loss) / big.loss, 1e-6) << p.objective->name() << " " << sizes[0];
    EXPECT_LT(rel_err(acc.grads, big.grads), 1e-6) << p.objective->name() << " " << sizes[0];
  }
  // Under fp16-style loss scaling the unscaled gradient is the same.
  LossScaler scaler(LossScalerOptions{.init = 1024.0});
  const Accumulated scaled = accumulate(p, {8, 8, 8, 3}, &scaler);
  EXPECT_LT(rel_err(scaled.grads, big.grads), 1e-6) << p.objective->name();

  // The test can tell: averaging the four micro-batches' mean gradients (the old rule) is off.
  std::vector<double> naive(big.grads.size(), 0.0);
  int64_t begin = 0;
  for (int64_t n : {8, 8, 8, 3}) {
    Problem one{std::move(p.model), std::move(p.objective), {}, {}, {}, p.x_tail, p.y_tail, n, {}, {}};
    if (!p.len.empty()) one.len.assign(p.len.begin() + begin, p.len.begin() + begin + n);
    one.x.assign(p.x.begin() + begin * numel_of(p.x_tail), p.x.begin() + (begin + n) * numel_of(p.x_tail));
    if (!p.labels.empty())
      one.labels.assign(p.labels.begin() + begin * numel_of(p.y_tail), p.labels.begin() + (begin + n) * numel_of(p.y_tail));
    else
      one.yf.assign(p.yf.begin() + begin * numel_of(p.y_tail), p.yf.begin() + (begin + n) * numel_of(p.y_tail));
    const Accumulated a = accumulate(one, {n});
    for (size_t i = 0; i < naive.size(); ++i) naive[i] += a.grads[i] / 4.0;
    p.model = std::move(one.model);
    p.objective = std::move(one.objective);
    begin += n;
  }
  EXPECT_GT(rel_err(naive, big.grads), 1e-3) << p.objective->name();
}

TEST(ObjectiveAccumulation, ForecasterMseUnequalMicroBatchesEqualOneBatch) {
  expect_unequal_micro_batches_match_one_batch(forecaster_problem(), 2);
}

// Padded samples of unequal lengths: micro-batches whose valid steps differ still give the big
// batch's loss and gradient (a bidirectional LSTM classifier pooling the mean of valid steps).
Problem padded_classifier_problem() {
  Problem p;
  ModelSpec s{"lstm", 3, 6, 8, 1, true, 0.f, 4};
  s.pooling = "mean";
  p.model = std::make_unique<Forecaster>(s);
  p.objective = make_objective(LossKind::cross_entropy, {}, ObjectiveTask::classify);
  Rng rng(24);
  p.model->init(rng);
  p.x = randn(rng, p.N * 6 * 3);
  for (int64_t i = 0; i < p.N; ++i) {
    p.labels.push_back(static_cast<int64_t>(rng.below(4)));
    p.len.push_back(1 + static_cast<int64_t>(rng.below(6)));
  }
  p.x_tail = {6, 3};
  p.y_tail = {};
  return p;
}

TEST(ObjectiveAccumulation, PaddedMicroBatchesOfUnequalLengthsEqualOneBatch) {
  Problem p = padded_classifier_problem();
  // The lengths reach the model: the same samples without them give another gradient.
  const Accumulated with = accumulate(p, {27});
  std::vector<int64_t> len = std::move(p.len);
  p.len.clear();
  const Accumulated without = accumulate(p, {27});
  EXPECT_GT(rel_err(with.grads, without.grads), 1e-3);
  p.len = std::move(len);
  expect_unequal_micro_batches_match_one_batch(std::move(p), 1);
}

TEST(ObjectiveAccumulation, ClassifierCrossEntropyUnequalMicroBatchesEqualOneBatch) {
  expect_unequal_micro_batches_match_one_batch(classifier_problem(), 1);
}

TEST(ObjectiveAccumulation, CharLmCrossEntropyUnequalMicroBatchesEqualOneBatch) {
  expect_unequal_micro_batches_match_one_batch(char_lm_problem(), 5);
}

// The loss a step reports is the sum over the count of the whole interval, not the mean of
// the micro-batches' means.
TEST(ObjectiveAccumulation, TakeLossWeighsEveryTargetOnce) {
  Problem p = forecaster_problem();
  GradRecorder rec;
  auto sched = make_schedule(ScheduleOptions{});
  TrainStep step(*p.model, rec, *sched, StepOptions{LossKind::mse, {}, 0.0, 2});
  step.run(p.xs(0, 24), p.ys(0, 24), 1);
  step.run(p.xs(24, 3), p.ys(24, 3), 1);
  int64_t count = 0;
  const double loss = step.take_loss(&count);
  EXPECT_EQ(count, 27 * 2);
  Arena arena;
  Tensor pred = ModelPass(*p.model, arena, false).forward(p.xs(0, 27));
  EXPECT_NEAR(loss, loss_forward(LossKind::mse, pred, p.ys(0, 27)), 1e-6 * loss);
  EXPECT_EQ(step.take_loss(&count), 0.0);
  EXPECT_EQ(count, 0);
}

}  // namespace
}  // namespace seqtrain::testing
