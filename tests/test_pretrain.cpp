// Masked pretraining's model side (models/reconstruction_head.h inside the lstm/gru and transformer
// families) and its objective (train/objective.h, masked_pretrain):
// - the training loss (masked MSE over masked, valid positions, plus the weighted std penalty) and
//   every parameter gradient, the mask token's included, against python/seqtrain_torch/pretrain.py
//   in float64 (tests/py/pretrain_ref.py), on batches with padding, for a 2-layer BiLSTM, a GRU
//   with zero fill and transformers with patches;
// - the same gradients against central finite differences of the loss (mask token, decoder and an
//   encoder weight, through the penalty too);
// - positions the mask does not mark change no loss and get no gradient through the loss;
// - the objective's count is the masked positions, and bad settings name their config key.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/registry.h"
#include "test_util.h"
#include "train/objective.h"

namespace seqtrain::testing {
namespace {

struct Case {
  const char* name;
  const char* type;
  bool bidirectional;
  int64_t layers;
  int64_t patch;
  const char* fill;
  float penalty;
  bool lengths;
};

ModelSpec pretrain_spec(const Case& c) {
  ModelSpec s;
  s.type = c.type;
  s.input_size = 3;
  s.lookback = 8;
  s.hidden = 8;
  s.heads = 2;
  s.layers = c.layers;
  s.bidirectional = c.bidirectional;
  s.patch_size = c.patch;
  s.output_size = 3;
  s.pooling = "mean";
  s.reconstruct = true;
  s.mask_fill = c.fill;
  s.std_penalty = c.penalty;
  s.autotune = false;
  return s;
}

constexpr int64_t kB = 4, kT = 8, kF = 3;

struct Data {
  std::vector<float> x, mask;
  std::vector<int64_t> lengths;
};

// x, a mask of about a third of the valid positions (never beyond a sample's length) and lengths.
Data make_data(Rng& rng, bool with_lengths) {
  Data d;
  d.x = randn(rng, kB * kT * kF);
  d.lengths = with_lengths ? std::vector<int64_t>{8, 5, 2, 7} : std::vector<int64_t>{};
  d.mask.assign(d.x.size(), 0.f);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < (with_lengths ? d.lengths[b] : kT); ++t)
      for (int64_t f = 0; f < kF; ++f) d.mask[(b * kT + t) * kF + f] = rng.uniform() < 0.35f ? 1.f : 0.f;
  d.mask[0] = 1.f;  // something is masked
  return d;
}

std::unique_ptr<Model> random_model(const ModelSpec& spec, uint64_t seed) {
  auto m = build_model(spec);
  Rng rng(seed);
  m->init(rng);
  for (size_t i = 0; i < m->params().size(); ++i) m->params().params()[i] += 0.2f * rng.normal();
  return m;
}

struct Pass {
  double loss = 0;
  std::vector<float> out, grads;
};

// One training pass as TrainStep runs it: loss = masked sum / count + the model's aux loss; the
// gradient of that loss in the ParamStore.
Pass run(Model& m, Data d, bool backward = true) {
  Batch batch = batch_of(Tensor(d.x.data(), {kB, kT, kF}));
  batch.targets = batch.inputs;
  batch.loss_mask = Tensor(d.mask.data(), {kB, kT, kF});
  if (!d.lengths.empty()) batch.lengths = Tensor(d.lengths.data(), {kB}, DType::i64);
  const auto objective = make_objective(LossKind::mse, LossOptions{}, ObjectiveTask::masked_pretrain);
  Arena arena;
  StepContext ctx(arena, /*training=*/true, 0);
  Pass p;
  const Tensor pred = m.forward(batch, ctx);
  p.out.assign(pred.f32(), pred.f32() + pred.numel());
  const ObjectiveSum s = objective->forward(pred, batch);
  p.loss = s.mean() + ctx.aux_loss;
  if (!backward) return p;
  Tensor dpred = arena.tensor(pred.shape);
  objective->backward(pred, batch, dpred, 1.0 / static_cast<double>(s.count));
  ctx.output_grad = dpred;
  ctx.aux_weight = 1.0;  // (1 / count) per target times the count
  m.params().zero_grad();
  m.backward(ctx);
  p.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
  return p;
}

class Pretrain : public ::testing::TestWithParam<Case> {};

TEST_P(Pretrain, LossAndGradientsMatchTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const Case c = GetParam();
  const ModelSpec spec = pretrain_spec(c);
  auto m = random_model(spec, 7);
  Rng rng(8);
  const Data d = make_data(rng, c.lengths);
  const Pass got = run(*m, d);
  TempDir dir;
  save_params(dir / "params.safetensors", m->params());
  write_npy(dir / "x.npy", d.x, {kB, kT, kF});
  write_npy(dir / "mask.npy", d.mask, {kB, kT, kF});
  if (c.lengths) write_npy(dir / "lengths.npy", d.lengths, {kB});
  std::ofstream(dir / "spec.json") << spec_to_json(spec).dump();
  ASSERT_EQ(run_python("pretrain_ref.py", dir.path.string()), 0);
  EXPECT_NEAR(got.loss, read_npy(dir / "loss.npy")[0], 1e-5 * std::max(1.0, got.loss));
  const std::vector<double> out = read_npy(dir / "out.npy");
  // Padded steps of an RNN decode its zero outputs (torch's pad_packed_sequence gives the same).
  EXPECT_LT(rel_err(got.out, out), 1e-5) << "reconstruction";
  for (const ParamEntry& e : m->params().entries()) {
    const std::vector<float> g(got.grads.begin() + e.offset, got.grads.begin() + e.offset + numel_of(e.shape));
    EXPECT_LT(rel_err(g, read_npy(dir / ("grad_" + e.name + ".npy"))), 2e-5) << e.name;
  }
}

// Central differences of the loss in the elements of a few tensors, the mask token first (it
// learns through the encoder's input gradient).
TEST_P(Pretrain, GradientsMatchFiniteDifferences) {
  const Case c = GetParam();
  ModelSpec spec = pretrain_spec(c);
  spec.backend = "reference";  // fp64 accumulation: finite differences of a float model need it
  auto m = random_model(spec, 11);
  Rng rng(12);
  const Data d = make_data(rng, c.lengths);
  const Pass got = run(*m, d);
  ParamStore& ps = m->params();
  int checked = 0;
  for (const ParamEntry& e : ps.entries()) {
    const bool pick = e.name == "mask_token" || e.name == "decoder.fc2.bias" || e.name == "decoder.norm.weight" ||
                      e.name == "rnn.bias_hh_l0" || e.name == "input_proj.bias";
    if (!pick) continue;
    const int64_t n = std::min<int64_t>(numel_of(e.shape), 6);
    for (int64_t i = 0; i < n; ++i) {
      float* w = ps.params() + e.offset + i;
      const float keep = *w;
      const float eps = 1e-2f;
      *w = keep + eps;
      const double lp = run(*m, d, false).loss;
      *w = keep - eps;
      const double lm = run(*m, d, false).loss;
      *w = keep;
      const double fd = (lp - lm) / (2.0 * eps);
      const double an = got.grads[e.offset + static_cast<size_t>(i)];
      EXPECT_NEAR(an, fd, 2e-3 + 2e-2 * std::abs(fd)) << e.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 12);
}

INSTANTIATE_TEST_SUITE_P(
    Families, Pretrain,
    ::testing::Values(Case{"bilstm_token_penalty", "lstm", true, 2, 1, "token", 0.5f, true},
                      Case{"gru_zero", "gru", false, 1, 1, "zero", 0.f, true},
                      Case{"lstm_full_length", "lstm", false, 1, 1, "token", 2.f, false},
                      Case{"transformer_patch2_penalty", "transformer", false, 2, 2, "token", 1.f, true},
                      Case{"transformer_patch1_zero", "transformer", false, 1, 1, "zero", 0.f, false}),
    [](const auto& i) { return std::string(i.param.name); });

// Positions the mask leaves alone reach no loss: changing their target values changes nothing.
TEST(PretrainObjective, CountsOnlyMaskedPositions) {
  Rng rng(3);
  const Data d = make_data(rng, true);
  std::vector<float> pred = randn(rng, static_cast<int64_t>(d.x.size()));
  std::vector<float> target = d.x;
  const auto objective = make_objective(LossKind::mse, LossOptions{}, ObjectiveTask::masked_pretrain);
  auto score = [&](std::vector<float>& t) {
    Batch b = batch_of(Tensor(pred.data(), {kB, kT, kF}));
    b.targets = Tensor(t.data(), {kB, kT, kF});
    b.loss_mask = Tensor(const_cast<float*>(d.mask.data()), {kB, kT, kF});
    return objective->forward(b.inputs, b);
  };
  const ObjectiveSum a = score(target);
  int64_t marked = 0;
  for (float v : d.mask) marked += v != 0.f;
  EXPECT_EQ(a.count, marked);
  for (size_t i = 0; i < target.size(); ++i)
    if (d.mask[i] == 0.f) target[i] += 5.f;
  const ObjectiveSum b = score(target);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_CONTAINS(error_of([] { (void)make_objective(LossKind::mae, LossOptions{}, ObjectiveTask::masked_pretrain); }),
                  "train.loss: mse");
}

}  // namespace
}  // namespace seqtrain::testing
