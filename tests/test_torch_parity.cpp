// The forecaster against PyTorch (Debian's python3-torch): one forward/backward for every
// cell/depth/direction combination, and a 100-step fp32 training run from the same weights.
// The char LM (embedding -> RNN -> per-step head): one forward/backward per cell.
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "models/forecaster.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "model_pass.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

struct ParityCase { const char* cell; int64_t layers; bool bidir; const char* impl = "fused"; };

class TorchParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TorchParity, OutputsAndEveryGradient) {
  SEQTRAIN_REQUIRE_TORCH();
  const ParityCase c = GetParam();
  const int64_t N = 8, T = 12, C = 5, H = 16, OUT = 3;
  Forecaster model(ModelSpec{c.cell, C, T, H, c.layers, c.bidir, 0.f, OUT, c.impl});
  Rng rng(11);
  model.init(rng);
  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  TempDir dir;
  save_params(dir / "model.safetensors", model.params());
  write_npy(dir / "x.npy", x, {N, T, C});
  write_npy(dir / "dy.npy", dy, {N, OUT});

  Arena arena;
  Tensor y = ModelPass(model, arena, true).forward(Tensor(x.data(), {N, T, C}));
  model.params().zero_grad();
  ModelPass(model, arena, true).backward(Tensor(dy.data(), {N, OUT}));

  ASSERT_EQ(run_python("forecaster_ref.py", dir.path.string() + " " + c.cell + " " + std::to_string(c.layers) + " " +
                                                (c.bidir ? "1" : "0") + " " + std::to_string(OUT) + " " +
                                                std::to_string(H)),
            0);
  auto yref = read_npy(dir / "y.npy");
  std::vector<float> yv(y.f32(), y.f32() + y.numel());
  EXPECT_LT(rel_err(yv, yref), 1e-5);
  SafetensorsFile grads = read_safetensors(dir / "grads.safetensors");
  ASSERT_EQ(grads.tensors.size(), model.params().entries().size());
  for (size_t i = 0; i < model.params().entries().size(); ++i) {
    const auto& e = model.params().entries()[i];
    const NamedTensor& ref = grads.at(e.name);
    std::vector<double> r(ref.numel());
    std::memcpy(r.data(), ref.bytes.data(), r.size() * sizeof(double));
    Tensor g = model.params().grad(i);
    std::vector<float> gv(g.f32(), g.f32() + g.numel());
    EXPECT_LT(rel_err(gv, r), 1e-5) << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Forecaster, TorchParity,
    ::testing::Values(ParityCase{"lstm", 1, false}, ParityCase{"lstm", 2, false}, ParityCase{"lstm", 3, false},
                      ParityCase{"lstm", 1, true}, ParityCase{"lstm", 2, true}, ParityCase{"lstm", 3, true},
                      ParityCase{"gru", 1, false}, ParityCase{"gru", 2, false}, ParityCase{"gru", 3, false},
                      ParityCase{"gru", 1, true}, ParityCase{"gru", 2, true}, ParityCase{"gru", 3, true},
                      ParityCase{"lstm", 2, true, "onednn"}, ParityCase{"gru", 2, true, "onednn"},
                      ParityCase{"lstm", 1, false, "onednn"}, ParityCase{"gru", 3, false, "onednn"}),
    [](const auto& info) {
      return std::string(info.param.cell) + "_l" + std::to_string(info.param.layers) +
             (info.param.bidir ? "_bi_" : "_uni_") + info.param.impl;
    });

// 100 steps of AdamW with clipping on fixed batches, no shuffle, constant LR.
TEST(TorchParityTraining, HundredStepsMatchPyTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const int64_t S = 100, B = 16, T = 10, C = 3, H = 24, L = 2, OUT = 2;
  const double lr = 3e-3, clip = 0.5;
  Forecaster model(ModelSpec{"lstm", C, T, H, L, false, 0.f, OUT});
  Rng rng(5);
  model.init(rng);
  TempDir dir;
  save_params(dir / "init.safetensors", model.params());
  // A learnable target: a smooth function of the window, so the loss really moves.
  std::vector<float> X(S * B * T * C), Y(S * B * OUT);
  for (auto& v : X) v = rng.normal();
  for (int64_t s = 0; s < S * B; ++s)
    for (int64_t o = 0; o < OUT; ++o) {
      float acc = 0;
      for (int64_t t = 0; t < T; ++t) acc += X[(s * T + t) * C + o] * (t + 1) / T;
      Y[s * OUT + o] = std::tanh(acc);
    }
  write_npy(dir / "x.npy", X, {S, B, T, C});
  write_npy(dir / "y.npy", Y, {S, B, OUT});

  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = lr});
  ScheduleOptions so;
  so.base_lr = lr;
  auto sched = make_schedule(so);
  TrainStep step(model, *opt, *sched, StepOptions{LossKind::mse, {}, clip, 1});
  std::vector<double> losses;
  for (int64_t s = 0; s < S; ++s) {
    step.run(Tensor(X.data() + s * B * T * C, {B, T, C}), Tensor(Y.data() + s * B * OUT, {B, OUT}), 0);
    losses.push_back(step.take_loss());
  }
  ASSERT_EQ(run_python("train_ref.py", dir.path.string() + " lstm " + std::to_string(L) + " " + std::to_string(H) +
                                           " " + std::to_string(S) + " " + std::to_string(lr) + " " +
                                           std::to_string(clip)),
            0);
  auto ref = read_npy(dir / "losses.npy");
  ASSERT_EQ(ref.size(), losses.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_LT(std::abs(losses[i] - ref[i]) / std::abs(ref[i]), 1e-4) << "step " << i;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << "the run should learn something";
  ParamStore final_ref;
  for (const auto& e : model.params().entries()) final_ref.add(e.name, e.shape);
  final_ref.finalize();
  load_params(dir / "final.safetensors", final_ref);
  std::vector<float> a(model.params().params(), model.params().params() + model.params().size());
  std::vector<float> b(final_ref.params(), final_ref.params() + final_ref.size());
  EXPECT_LT(rel_err(a, b), 1e-3);
}

}  // namespace
}  // namespace seqtrain::testing
