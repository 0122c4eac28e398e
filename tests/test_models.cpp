// Models: weights round trip with PyTorch both ways (LSTM, GRU, MLP), initialisation bounds,
// gradient accumulation, the MLP's backward, and shape errors.
#include <gtest/gtest.h>

#include <cmath>

#include "io/safetensors.h"
#include "models/mlp.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

struct RtCase { const char* kind; int64_t layers; bool bidir; };
class ModelsRoundTrip : public ::testing::TestWithParam<RtCase> {};

std::string rt_args(const RtCase& c, int64_t C, int64_t T, int64_t H, int64_t OUT) {
  return std::string(c.kind) + " " + std::to_string(C) + " " + std::to_string(T) + " " + std::to_string(H) + " " +
         std::to_string(c.layers) + " " + (c.bidir ? "1" : "0") + " " + std::to_string(OUT);
}

std::vector<float> predict(Model& m, std::vector<float>& x, int64_t N, int64_t T, int64_t C) {
  Arena arena;
  Tensor y = ModelPass(m, arena, false).forward(Tensor(x.data(), {N, T, C}));
  return std::vector<float>(y.f32(), y.f32() + y.numel());
}

TEST_P(ModelsRoundTrip, TorchToSeqtrainAndBack) {
  SEQTRAIN_REQUIRE_TORCH();
  const RtCase c = GetParam();
  const int64_t C = 4, T = 9, H = 10, OUT = 3, N = 7;
  TempDir dir;
  // PyTorch-initialised weights -> seqtrain: same predictions.
  ASSERT_EQ(run_python("roundtrip.py", dir.path.string() + " from_torch " + rt_args(c, C, T, H, OUT)), 0);
  auto model = make_model(ModelSpec{c.kind, C, T, H, c.layers, c.bidir, 0.f, OUT});
  load_params(dir / "model.safetensors", model->params());
  std::vector<double> xd = read_npy(dir / "x.npy");
  std::vector<float> x(xd.begin(), xd.end());
  EXPECT_LT(rel_err(predict(*model, x, N, T, C), read_npy(dir / "y_torch.npy")), 1e-5);
  // seqtrain weights (perturbed, so they differ from torch's) -> PyTorch: same predictions.
  Rng rng(3);
  model->init(rng);
  save_params(dir / "model.safetensors", model->params());
  ASSERT_EQ(run_python("roundtrip.py", dir.path.string() + " from_seqtrain " + rt_args(c, C, T, H, OUT)), 0);
  EXPECT_LT(rel_err(predict(*model, x, N, T, C), read_npy(dir / "y_torch.npy")), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ModelsRoundTrip,
                         ::testing::Values(RtCase{"lstm", 2, true}, RtCase{"gru", 2, false}, RtCase{"mlp", 2, false}),
                         [](const auto& info) { return std::string(info.param.kind); });

TEST(ModelsInit, RnnAndHeadUniformWithinTorchBounds) {
  const int64_t H = 50;
  auto m = make_model(ModelSpec{"lstm", 8, 5, H, 2, false, 0.f, 3});
  Rng rng(9);
  m->init(rng);
  for (size_t i = 0; i < m->params().entries().size(); ++i) {
    const auto& e = m->params().entries()[i];
    const double fan = e.name.rfind("head", 0) == 0 ? double(H) : double(H);  // head fan_in = H here
    const double bound = 1.0 / std::sqrt(fan);
    Tensor p = m->params().param(i);
    float lo = 1e9f, hi = -1e9f;
    for (int64_t k = 0; k < p.numel(); ++k) { lo = std::min(lo, p.f32()[k]); hi = std::max(hi, p.f32()[k]); }
    EXPECT_GE(lo, -bound) << e.name;
    EXPECT_LE(hi, bound) << e.name;
    if (p.numel() > 100) {
      EXPECT_LT(lo, -0.9 * bound) << e.name;
      EXPECT_GT(hi, 0.9 * bound) << e.name;
    }
  }
}

TEST(ModelsGradAccum, TwoHalfBatchesEqualOneFullBatch) {
  const int64_t N = 16, T = 6, C = 3, OUT = 2;
  auto a = make_model(ModelSpec{"gru", C, T, 12, 2, false, 0.f, OUT});
  auto b = make_model(ModelSpec{"gru", C, T, 12, 2, false, 0.f, OUT});
  Rng rng(4);
  a->init(rng);
  std::copy(a->params().params(), a->params().params() + a->params().size(), b->params().params());
  std::vector<float> x(N * T * C), y(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : y) v = rng.normal();
  auto oa = make_optimizer(OptimizerOptions{.name = "sgd", .lr = 0.1});
  auto ob = make_optimizer(OptimizerOptions{.name = "sgd", .lr = 0.1});
  auto sa = make_schedule(ScheduleOptions{.base_lr = 0.1});
  auto sb = make_schedule(ScheduleOptions{.base_lr = 0.1});
  TrainStep full(*a, *oa, *sa, StepOptions{LossKind::mse, {}, 0.0, 1});
  TrainStep half(*b, *ob, *sb, StepOptions{LossKind::mse, {}, 0.0, 2});
  EXPECT_TRUE(full.run(Tensor(x.data(), {N, T, C}), Tensor(y.data(), {N, OUT}), 0).updated);
  EXPECT_FALSE(half.run(Tensor(x.data(), {N / 2, T, C}), Tensor(y.data(), {N / 2, OUT}), 0).updated);
  EXPECT_TRUE(half.run(Tensor(x.data() + N / 2 * T * C, {N / 2, T, C}), Tensor(y.data() + N / 2 * OUT, {N / 2, OUT}), 0).updated);
  std::vector<float> pa(a->params().params(), a->params().params() + a->params().size());
  std::vector<float> pb(b->params().params(), b->params().params() + b->params().size());
  EXPECT_LT(rel_err(pb, pa), 1e-6);
  // And the update really happened.
  std::vector<float> p0(pa.size());
  EXPECT_GT(rel_err(pa, std::vector<float>(pa.size(), 0.f)), 0.0);
}

// The MLP's backward against central differences of its own forward (in f32, coarse eps).
TEST(ModelsMlp, BackwardMatchesFiniteDifferences) {
  const int64_t N = 4, T = 5, C = 2, OUT = 3;
  MlpForecaster m(ModelSpec{"mlp", C, T, 7, 2, false, 0.f, OUT});
  Rng rng(2);
  m.init(rng);
  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  auto objective = [&] {
    Arena arena;
    Tensor y = ModelPass(m, arena, false).forward(Tensor(x.data(), {N, T, C}));
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += double(dy[i]) * y.f32()[i];
    return s;
  };
  Arena arena;
  ModelPass(m, arena, true).forward(Tensor(x.data(), {N, T, C}));
  m.params().zero_grad();
  ModelPass(m, arena, true).backward(Tensor(dy.data(), {N, OUT}));
  std::vector<double> an, fd;
  float* p = m.params().params();
  for (size_t i = 0; i < m.params().size(); i += 3) {
    const float keep = p[i], eps = 1e-2f;
    p[i] = keep + eps;
    double up = objective();
    p[i] = keep - eps;
    double down = objective();
    p[i] = keep;
    fd.push_back((up - down) / (2.0 * eps));
    an.push_back(m.params().grads()[i]);
  }
  EXPECT_LT(rel_err(an, fd), 2e-3);
}

TEST(ModelsErrors, WrongInputShapeIsAClearError) {
  auto m = make_model(ModelSpec{"lstm", 3, 5, 4, 1, false, 0.f, 1});
  std::vector<float> x(2 * 5 * 4);
  Arena arena;
  try {
    ModelPass(*m, arena, false).forward(Tensor(x.data(), {2, 5, 4}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[batch, time, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model(ModelSpec{"tcn", 3, 5, 4, 1, false, 0.f, 1}), Error);
}

}  // namespace
}  // namespace seqtrain::testing
