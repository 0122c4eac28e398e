// model.type cnn (models/cnn_encoder.h) and its layer, nn/conv1d.h:
// - Conv1d's output, input gradient and weight / bias gradients against torch's
//   nn.Conv1d(padding="same") in float64 (tests/py/layers_ref.py), odd and even kernels, in != out,
//   with and without a padding mask, within 1e-5; and against central differences of a double
//   convolution written here;
// - the whole model's gradients against central differences of its loss, and its outputs and every
//   parameter gradient against python/seqtrain_torch's mirror (cnn.py) loaded strict, on a padded
//   batch, for each pooling (tests/mirror_parity.h);
// - values at padded steps change no output and no gradient, bit for bit;
// - through the binary, on a variable-length npy set: a classifier's logits equal the mirror's from
//   the run's model.safetensors (tests/py/run_mirror_check.py), `seqtrain embed` equals the mirror's
//   pooled output (tests/py/encoder_check.py), within 1e-5;
//   masked pretraining's loss falls; its exported encoder fills a classifier (model.encoder_from)
//   bit for bit, a frozen epoch keeps it bit for bit, and an encoder of another shape is refused
//   naming the tensor and both shapes;
// - bad settings (model.kernel_sizes, model.layers, model.pooling, model.patch_size, model.norm) are
//   errors naming their key;
// - model.norm batch (nn/batch_norm.h; the layer itself in test_batch_norm.cpp): outputs, gradients
//   and the updated running statistics against the mirror in train mode, outputs and gradients in
//   eval mode; padded steps change nothing in either mode; a frozen encoder keeps its statistics;
//   through the binary: the checkpoint loads into the mirror strictly and gives its logits, the
//   exported encoder carries norm batch and embeds as PyTorch does, a run stopped and resumed (with
//   train.ema_decay) ends bit for bit as the uninterrupted one with whole num_batches_tracked, frozen
//   fine-tuning epochs keep every encoder byte (statistics included), and an encoder of the other
//   norm is refused naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "encoder_checks.h"
#include "io/safetensors.h"
#include "mirror_parity.h"
#include "models/cnn_encoder.h"
#include "models/encoder.h"
#include "models/registry.h"
#include "nn/conv1d.h"
#include "npy_class_set.h"
#include "stop_at.h"
#include "test_trainer_util.h"
#include "test_util.h"
#include "train/encoder_from.h"
#include "train/load_model.h"

namespace seqtrain::testing {
namespace {

using cli::Result;
using cli::run_seqtrain;

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

std::vector<float> grad_of(const ParamStore& ps, const ParamEntry& e) {
  const float* g = ps.grads() + e.offset;
  return std::vector<float>(g, g + numel_of(e.shape));
}

// [B, T] bytes, 1 from each sample's length on (nn/sequence_pool.h's padding_mask, on the host).
std::vector<uint8_t> host_mask(const std::vector<int64_t>& lengths, int64_t T) {
  std::vector<uint8_t> m(lengths.size() * static_cast<size_t>(T), 0);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t t = lengths[b]; t < T; ++t) m[b * static_cast<size_t>(T) + static_cast<size_t>(t)] = 1;
  return m;
}

// ---------------------------------------------------------------------------------------------
// Conv1d

struct ConvPass {
  std::vector<float> x, dy, y, dx;
};

// One forward and backward of `conv` on x [B, T, in] and dy [B, T, out] (the gradients zeroed first).
ConvPass run_conv(Conv1d& conv, int64_t B, int64_t T, const std::vector<int64_t>& lengths, Rng& rng) {
  ConvPass p;
  p.x = randn(rng, B * T * conv.in);
  p.dy = randn(rng, B * T * conv.out);
  const std::vector<uint8_t> mask = host_mask(lengths, T);
  Arena arena;
  conv.params.zero_grad();
  p.y = values(conv.forward(Tensor(p.x.data(), {B, T, conv.in}), lengths.empty() ? nullptr : mask.data(), arena));
  p.dx = values(conv.backward(Tensor(p.dy.data(), {B, T, conv.out}), arena, true));
  return p;
}

struct ConvCase {
  int64_t in, out, k;
  bool padded;
};
class Conv1dTorch : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv1dTorch, OutputAndEveryGradientMatchTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const ConvCase c = GetParam();
  constexpr int64_t B = 3, T = 7;
  ParamStore ps;
  Conv1d conv(ps, "conv", c.in, c.out, c.k);
  ps.finalize();
  EXPECT_EQ(ps.find("conv.weight")->shape, (Shape{c.out, c.in, c.k}));
  Rng rng(static_cast<uint64_t>(c.k * 100 + c.in));
  conv.init(rng);
  for (size_t i = 0; i < ps.size(); ++i) ps.params()[i] += 0.1f * rng.normal();  // the bias too
  const std::vector<int64_t> lengths = c.padded ? std::vector<int64_t>{7, 4, 1} : std::vector<int64_t>{};
  const ConvPass got = run_conv(conv, B, T, lengths, rng);
  TempDir dir;
  write_npy(dir / "x.npy", got.x, {B, T, c.in});
  write_npy(dir / "weight.npy", ps.param(conv.weight).f32(), {c.out, c.in, c.k});
  write_npy(dir / "bias.npy", ps.param(conv.bias).f32(), {c.out});
  write_npy(dir / "dy.npy", got.dy, {B, T, c.out});
  if (c.padded) write_npy(dir / "lengths.npy", lengths, {B});
  ASSERT_EQ(run_python("layers_ref.py", "conv1d " + dir.path.string()), 0);
  EXPECT_LT(rel_err(got.y, read_npy(dir / "y_ref.npy")), 1e-5) << "y";
  EXPECT_LT(rel_err(got.dx, read_npy(dir / "dx_ref.npy")), 1e-5) << "dx";
  EXPECT_LT(rel_err(grad_of(ps, ps.entries()[conv.weight]), read_npy(dir / "dweight_ref.npy")), 1e-5) << "dweight";
  EXPECT_LT(rel_err(grad_of(ps, ps.entries()[conv.bias]), read_npy(dir / "dbias_ref.npy")), 1e-5) << "dbias";
}

INSTANTIATE_TEST_SUITE_P(Cnn, Conv1dTorch,
                         ::testing::Values(ConvCase{3, 5, 4, false}, ConvCase{3, 5, 4, true}, ConvCase{2, 4, 3, true},
                                           ConvCase{4, 4, 1, false}, ConvCase{1, 6, 8, true},
                                           ConvCase{5, 3, 5, false}),
                         [](const auto& i) {
                           return "in" + std::to_string(i.param.in) + "_out" + std::to_string(i.param.out) + "_k" +
                                  std::to_string(i.param.k) + (i.param.padded ? "_padded" : "");
                         });

// sum of y * r for the convolution written out in double: torch's 'same' padding, padded steps
// read as zeros.
double conv_loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<float>& r, const std::vector<int64_t>& lengths, int64_t B, int64_t T, int64_t in,
                 int64_t out, int64_t k) {
  const int64_t left = (k - 1) / 2;
  double loss = 0;
  for (int64_t n = 0; n < B; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double y = b[o];
        for (int64_t j = 0; j < k; ++j) {
          const int64_t s = t + j - left;
          if (s < 0 || s >= T || s >= lengths[n]) continue;
          for (int64_t c = 0; c < in; ++c) y += w[(o * in + c) * k + j] * x[(n * T + s) * in + c];
        }
        loss += y * r[(n * T + t) * out + o];
      }
  return loss;
}

TEST(Conv1dGradients, MatchCentralDifferencesOfADoubleConvolution) {
  for (const int64_t k : {3, 4}) {
    constexpr int64_t B = 2, T = 6, in = 2, out = 3;
    ParamStore ps;
    Conv1d conv(ps, "conv", in, out, k);
    ps.finalize();
    Rng rng(static_cast<uint64_t>(k));
    conv.init(rng);
    const std::vector<int64_t> lengths{6, 3};
    const ConvPass got = run_conv(conv, B, T, lengths, rng);
    std::vector<double> x(got.x.begin(), got.x.end());
    std::vector<double> w(ps.params(), ps.params() + out * in * k);
    std::vector<double> b(ps.params() + out * in * k, ps.params() + ps.size());
    auto f = [&] { return conv_loss(x, w, b, got.dy, lengths, B, T, in, out, k); };
    EXPECT_LT(rel_err(got.dx, numgrad(x, f)), 1e-5) << "dx, k " << k;
    EXPECT_LT(rel_err(grad_of(ps, ps.entries()[conv.weight]), numgrad(w, f)), 1e-5) << "dW, k " << k;
    EXPECT_LT(rel_err(grad_of(ps, ps.entries()[conv.bias]), numgrad(b, f)), 1e-5) << "db, k " << k;
    for (int64_t t = 3; t < T; ++t)  // sample 1's padded steps
      for (int64_t c = 0; c < in; ++c) EXPECT_EQ(got.dx[static_cast<size_t>((T + t) * in + c)], 0.f) << t;
  }
}

// The CPU backend's columns (OpenMP over rows) are the reference backend's bit for bit: copies, and
// col2im's per-element sums in one fixed order (j ascending) on both.
TEST(Conv1dColumns, CpuMatchesTheReferenceBitForBit) {
  for (const int64_t k : {1, 4, 5}) {
    const Conv1dArgs a{.batch = 4, .steps = 150, .channels = 32, .kernel = k, .pad_left = (k - 1) / 2};
    Rng rng(static_cast<uint64_t>(k));
    const std::vector<float> x = randn(rng, 4 * 150 * 32), dcols = randn(rng, 4 * 150 * 32 * k);
    const std::vector<uint8_t> mask = host_mask({150, 90, 1, 149}, 150);
    for (const uint8_t* m : {static_cast<const uint8_t*>(nullptr), mask.data()}) {
      Conv1dArgs am = a;
      am.mask = m;
      std::vector<float> cols[2], dx[2];
      Backend* backends[2] = {&backend_named("cpu"), &backend_named("reference")};
      for (int i = 0; i < 2; ++i) {
        cols[i].assign(dcols.size(), -1.f);
        dx[i].assign(x.size(), -1.f);
        backends[i]->im2col_1d(am, x.data(), cols[i].data());
        backends[i]->col2im_1d(am, dcols.data(), dx[i].data());
      }
      EXPECT_EQ(cols[0], cols[1]) << "k " << k << (m ? " masked" : "");
      EXPECT_EQ(dx[0], dx[1]) << "k " << k << (m ? " masked" : "");
    }
  }
}

// A frozen weight gets no gradient work: its gradient stays as it was (zero), the bias's still comes.
TEST(Conv1dGradients, AFrozenWeightIsSkipped) {
  ParamStore ps;
  Conv1d conv(ps, "conv", 2, 3, 3);
  ps.finalize();
  Rng rng(9);
  conv.init(rng);
  ps.set_frozen(conv.weight, true);
  run_conv(conv, 2, 5, {}, rng);
  for (float g : grad_of(ps, ps.entries()[conv.weight])) ASSERT_EQ(g, 0.f);
  EXPECT_NE(grad_of(ps, ps.entries()[conv.bias]), std::vector<float>(3, 0.f));
}

// ---------------------------------------------------------------------------------------------
// The model

ModelSpec cnn_spec(const std::string& pooling, std::vector<int64_t> kernels = {4, 3}) {
  ModelSpec s;
  s.type = "cnn";
  s.input_size = 3;
  s.lookback = 8;
  s.hidden = 8;
  s.kernel_sizes = std::move(kernels);
  s.layers = static_cast<int64_t>(s.kernel_sizes.size());
  s.output_size = 2;
  s.pooling = pooling;
  return s;
}

// A model with every parameter visibly away from its init (LayerNorm weights too; BatchNorm's
// running statistics too, but for num_batches_tracked, a whole count).
std::unique_ptr<Model> random_cnn(const ModelSpec& spec, uint64_t seed) {
  auto m = build_model(spec);
  Rng rng(seed);
  m->init(rng);
  for (size_t i = 0; i < m->params().size(); ++i) m->params().params()[i] += 0.1f * rng.normal();
  for (const ParamEntry& e : m->params().entries())
    if (e.name.ends_with("num_batches_tracked")) m->params().params()[e.offset] = 2.f;
  return m;
}

// One forward and backward on x [B, 8, 3] with `lengths` (empty: none) and dy.
ModelResult run_model(Model& m, std::vector<float> x, std::vector<int64_t> lengths, const std::vector<float>& dy) {
  const int64_t B = static_cast<int64_t>(x.size()) / (8 * 3);
  return run_model_pass(m, std::move(x), {B, 8, 3}, std::move(lengths), dy);
}

class CnnModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CnnModel, MatchesThePythonMirrorOnAPaddedBatch) {
  SEQTRAIN_REQUIRE_TORCH();
  const ModelSpec spec = cnn_spec(GetParam());
  auto m = random_cnn(spec, 41);
  Rng rng(42);
  const PaddedBatch p(rng);
  expect_mirror_parity(spec, m->params(), p.x, {4, 8, 3}, p.lengths, p.dy, run_model(*m, p.x, p.lengths, p.dy));
}

// Values at padded steps reach nothing: new values there change no output and no parameter
// gradient, bit for bit; a valid step's value does change the output.
TEST_P(CnnModel, PaddedStepsChangeNoOutputAndNoGradient) {
  auto m = random_cnn(cnn_spec(GetParam()), 43);
  Rng rng(44);
  auto [p, b] = expect_unread_steps(*m, rng, [](int64_t len) { return len; }, GetParam());
  p.x[(1 * 8 + 4) * 3] += 1.f;  // sample 1's last valid step
  EXPECT_NE(run_model(*m, p.x, p.lengths, p.dy).y, b.y);
}

INSTANTIATE_TEST_SUITE_P(Cnn, CnnModel, ::testing::Values("mean", "last", "max"));

// model.norm batch: a copy of the model's store (layout and values), to compare a pass's
// running-statistics update against the mirror's from the same start.
ParamStore copy_of(ParamStore& ps) {
  ParamStore c = ps.clone_layout();
  std::memcpy(c.params(), ps.params(), ps.size() * sizeof(float));
  return c;
}

ModelSpec cnn_batch_spec(const std::string& pooling) {
  ModelSpec s = cnn_spec(pooling);
  s.norm = "batch";
  return s;
}

class CnnBatchNorm : public ::testing::TestWithParam<const char*> {};

// Train mode: batch statistics over the valid steps, outputs, every gradient and the updated
// running statistics as the mirror's (torch's BatchNorm1d on the gathered valid steps); eval mode:
// the running statistics, as the mirror's eval().
TEST_P(CnnBatchNorm, MatchesTheMirrorInTrainAndEvalMode) {
  SEQTRAIN_REQUIRE_TORCH();
  const ModelSpec spec = cnn_batch_spec(GetParam());
  auto m = random_cnn(spec, 61);
  ASSERT_NE(m->params().find("norms.1.running_var"), nullptr);
  Rng rng(62);
  const PaddedBatch p(rng);
  const ParamStore before = copy_of(m->params());
  const ModelResult train = run_model_pass(*m, p.x, {4, 8, 3}, p.lengths, p.dy, /*training=*/true);
  expect_mirror_parity(spec, before, p.x, {4, 8, 3}, p.lengths, p.dy, train, /*eval=*/false, &m->params());
  EXPECT_EQ(m->params().params()[m->params().find("norms.0.num_batches_tracked")->offset], 3.f);
  const ModelResult eval = run_model_pass(*m, p.x, {4, 8, 3}, p.lengths, p.dy, /*training=*/false);
  EXPECT_NE(eval.y, train.y);
  expect_mirror_parity(spec, m->params(), p.x, {4, 8, 3}, p.lengths, p.dy, eval, /*eval=*/true);
}

// Values at padded steps reach nothing in either mode: not the batch statistics, not an output,
// not a gradient (bit for bit); a valid step's value does change the output.
TEST_P(CnnBatchNorm, PaddedStepsChangeNoOutputAndNoGradientInEitherMode) {
  for (const bool training : {true, false}) {
    auto m = random_cnn(cnn_batch_spec(GetParam()), 63);
    Rng rng(64);
    auto [p, b] = expect_unread_steps(*m, rng, [](int64_t len) { return len; }, GetParam(), training);
    p.x[(1 * 8 + 4) * 3] += 1.f;  // sample 1's last valid step
    EXPECT_NE(run_model_pass(*m, p.x, {4, 8, 3}, p.lengths, p.dy, training).y, b.y) << training;
  }
}

INSTANTIATE_TEST_SUITE_P(Cnn, CnnBatchNorm, ::testing::Values("mean", "max"));

// The frozen encoder with BatchNorm (fine-tuning's first epochs): a training pass runs on the
// running statistics and changes none of them, no gradient below the head.
TEST(CnnBatchNorm, AFrozenEncoderKeepsItsStatisticsAndGetsNoGradient) {
  auto m = random_cnn(cnn_batch_spec("mean"), 65);
  ParamStore& ps = m->params();
  for (size_t i = 0; i < ps.entries().size(); ++i) ps.set_frozen(i, is_encoder_tensor(ps.entries()[i].name));
  Rng rng(66);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  const std::vector<float> before(ps.params(), ps.params() + ps.size());
  const ModelResult frozen = run_model_pass(*m, x, {4, 8, 3}, {8, 5, 2, 7}, dy, /*training=*/true);
  EXPECT_EQ(std::vector<float>(ps.params(), ps.params() + ps.size()), before);
  const ModelResult eval = run_model_pass(*m, x, {4, 8, 3}, {8, 5, 2, 7}, dy, /*training=*/false);
  EXPECT_EQ(frozen.y, eval.y);
  for (const ParamEntry& e : ps.entries()) {
    if (!is_encoder_tensor(e.name)) continue;
    for (int64_t i = 0; i < numel_of(e.shape); ++i) ASSERT_EQ(frozen.grads[e.offset + static_cast<size_t>(i)], 0.f) << e.name;
  }
}

// Every parameter's gradient against central differences of sum(y * r) (the model in float, the
// differences taken in double over steps of 1e-3), on a padded batch.
TEST(CnnModelGradients, MatchCentralDifferences) {
  ModelSpec spec = cnn_spec("mean", {3, 2});
  spec.hidden = 4;
  auto m = random_cnn(spec, 47);
  Rng rng(48);
  const std::vector<int64_t> lengths{8, 5};
  const std::vector<float> x = randn(rng, 2 * 8 * 3), r = randn(rng, 2 * 2);
  const ModelResult got = run_model(*m, x, lengths, r);
  ParamStore& ps = m->params();
  std::vector<double> p(ps.params(), ps.params() + ps.size());
  auto f = [&] {
    for (size_t i = 0; i < p.size(); ++i) ps.params()[i] = static_cast<float>(p[i]);
    const std::vector<float> y = run_model(*m, x, lengths, r).y;
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * r[i];
    return s;
  };
  const std::vector<double> num = numgrad(p, f, 1e-3);
  EXPECT_LT(rel_err(got.grads, num), 2e-3);
}

// The frozen encoder (fine-tuning's first epochs): no gradient below the head, the head's as before.
TEST(CnnModelGradients, AFrozenEncoderGetsNoGradientAndTheHeadsIsUnchanged) {
  auto m = random_cnn(cnn_spec("mean"), 49);
  Rng rng(50);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  ParamStore& ps = m->params();
  const ModelResult all = run_model(*m, x, {8, 5, 2, 7}, dy);
  for (size_t i = 0; i < ps.entries().size(); ++i) ps.set_frozen(i, is_encoder_tensor(ps.entries()[i].name));
  const ModelResult head_only = run_model(*m, x, {8, 5, 2, 7}, dy);
  for (const ParamEntry& e : ps.entries())
    for (int64_t i = 0; i < numel_of(e.shape); ++i) {
      const size_t at = e.offset + static_cast<size_t>(i);
      if (is_encoder_tensor(e.name)) ASSERT_EQ(head_only.grads[at], 0.f) << e.name;
      else ASSERT_EQ(head_only.grads[at], all.grads[at]) << e.name;
    }
}

// ---------------------------------------------------------------------------------------------
// Settings

// Each config is refused with a message holding every part (the key, where it is, the fix).
TEST(CnnSettings, BadSettingsNameTheirKeyAndTheFix) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"model:\n  type: cnn\n  kernel_sizes: []\n", {"model.kernel_sizes", "is empty", "like [8, 5, 3]"}},
      {"model:\n  type: cnn\n  kernel_sizes: [8, 0, 3]\n", {"m.yaml:3:", "model.kernel_sizes", "got '0'"}},
      {"model:\n  type: lstm\n  kernel_sizes: [3, 3]\n",
       {"model.kernel_sizes", "model.type lstm has no convolutions", "set model.type cnn"}},
      {"model:\n  type: cnn\n  layers: 4\n", {"model.layers", "list 4 kernel sizes in model.kernel_sizes"}},
      {"model:\n  type: cnn\n  patch_size: 2\n", {"model.patch_size", "leave it 1"}},
      {"model:\n  type: cnn\n  pooling: cls\n", {"model.pooling", "use last, mean or max"}},
      {"model:\n  type: lstm\n  norm: batch\n",
       {"model.norm", "model.type lstm has no norm to choose", "set model.type cnn"}},
      {"model:\n  type: cnn\n  norm: bacth\n", {"m.yaml:3:", "model.norm", "did you mean 'batch'"}},
  };
  for (const auto& [yaml, parts] : cases) {
    TempDir dir;
    const std::string e = error_of([&] { load_config(write_file(dir, "m.yaml", yaml)); });
    for (const std::string& part : parts) EXPECT_CONTAINS(e, part);
  }
  EXPECT_CONTAINS(error_of([] { CnnEncoder m(cnn_spec("mean", {})); }), "model.kernel_sizes");
  EXPECT_CONTAINS(error_of([] { CnnEncoder m(cnn_spec("mean", {3, 0})); }), "model.kernel_sizes");
  EXPECT_CONTAINS(error_of([] {
                    ModelSpec s = cnn_spec("mean");
                    s.norm = "group";
                    CnnEncoder m(s);
                  }),
                  "model.norm");
  // Unset, every family keeps layer; batch round-trips through model_spec.
  TempDir dir;
  Config c = load_config(write_file(dir, "n.yaml", "model:\n  type: cnn\n  norm: batch\n"));
  EXPECT_EQ(c.model.norm, "batch");
  const ModelSpec s = spec_from_config(c, DataShape{.features = 2, .steps = 10, .outputs = 3});
  EXPECT_EQ(s.norm, "batch");
  EXPECT_EQ(spec_from_json(spec_to_json(s)), s);
  nlohmann::json old = spec_to_json(s);
  old.erase("norm");  // a model_spec written before model.norm
  EXPECT_EQ(spec_from_json(old).norm, "layer");
  EXPECT_EQ(Config{}.model.norm, "layer");
}

// Repeats are allowed, --set takes a flow list, model.layers may agree with the list, and pooling
// auto is the family's own: mean for cnn, last for the others.
TEST(CnnSettings, KernelSizesAndPoolingResolve) {
  TempDir dir;
  const std::string path = write_file(dir, "m.yaml", "model:\n  type: cnn\n  kernel_sizes: [3, 3, 3]\n  layers: 3\n");
  Config c = load_config(path);
  EXPECT_EQ(c.model.kernel_sizes, (std::vector<int64_t>{3, 3, 3}));
  c = load_config(path, {"model.kernel_sizes=[7, 5]", "model.layers=1"});
  EXPECT_EQ(c.model.kernel_sizes, (std::vector<int64_t>{7, 5}));
  const DataShape shape{.features = 2, .steps = 10, .outputs = 3};
  ModelSpec s = spec_from_config(c, shape);
  EXPECT_EQ(s.pooling, "mean");
  EXPECT_EQ(s.layers, 2);
  EXPECT_EQ(s.kernel_sizes, (std::vector<int64_t>{7, 5}));
  c.model.pooling = "max";
  EXPECT_EQ(spec_from_config(c, shape).pooling, "max");
  Config lstm;
  EXPECT_EQ(spec_from_config(lstm, shape).pooling, "last");
  EXPECT_EQ(spec_from_json(spec_to_json(s)), s);
}

// ---------------------------------------------------------------------------------------------
// Through the binary

constexpr int64_t kClasses = kSetClasses;

const NpyClassSet& set_data() { return npy_class_set(); }

// A cnn (8 channels, kernels [3, 2]) on the set: `train` the yaml lines under train:, `model` more
// lines under model:.
std::string set_config(const TempDir& dir, const std::string& name, const std::string& train,
                       const std::string& model = "") {
  return write_file(dir, name + ".yaml",
                    npy_class_set_yaml() + "model:\n  type: cnn\n  hidden: 8\n  kernel_sizes: [3, 2]\n" + model +
                        "train:\n  batch_size: 16\n  optimizer:\n    lr: 0.01\n" + train +
                        "runtime:\n  threads: 1\n  deterministic: true\n");
}

const std::string kClassify = "  task: classify\n  loss: cross_entropy\n  epochs: 2\n";

const ExportedRun& classifier_run() {
  static ExportedRun r([](const TempDir& dir) { return set_config(dir, "cnn", kClassify); });
  return r;
}

// The run's model (lm, loaded from r.run) on the test split's raw windows (with their lengths), in
// eval mode, against the mirror built from the checkpoint's model_spec and loaded strict from its
// model.safetensors.
void expect_logits_match_the_mirror(const ExportedRun& r, LoadedModel& lm) {
  std::vector<int64_t> xs;
  const std::vector<double> xd = read_npy(set_data() / "test_x.npy", &xs);
  std::vector<float> x(xd.begin(), xd.end());
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < xs[0]; ++i) lengths.push_back(NpyClassSet::length(i));
  Batch batch = batch_of(Tensor(x.data(), {xs[0], xs[1], xs[2]}));
  batch.lengths = Tensor(lengths.data(), {xs[0]}, DType::i64);
  Arena arena;
  StepContext ctx(arena);
  const std::vector<float> logits = values(lm.model->forward(batch, ctx));
  TempDir io;
  write_npy(io / "logits.npy", logits, {xs[0], kClasses});
  ASSERT_EQ(run_python("run_mirror_check.py", r.run + "/checkpoints/best " + (set_data() / "test_x.npy") + " " +
                                                  (set_data() / "test_len.npy") + " " + (io / "logits.npy")),
            0)
      << "the mirror's logits differ (report above)";
}

TEST(CnnRun, ClassifierLogitsMatchTheMirrorOfItsSavedWeights) {
  SEQTRAIN_REQUIRE_TORCH();
  const ExportedRun& r = classifier_run();
  LoadedModel lm = load_model(r.run);
  EXPECT_EQ(lm.spec.type, "cnn");
  EXPECT_EQ(lm.spec.pooling, "mean");
  expect_logits_match_the_mirror(r, lm);
}

// The exported encoder is the checkpoint's encoder tensors byte for byte, with the cnn's metadata,
// and PyTorch's load_encoder embeds as `seqtrain embed` does (npy_class_set.h).
TEST(CnnRun, ExportedEncoderLoadsInPyTorchAndEmbedsAsSeqtrainEmbed) {
  const ExportedRun& r = classifier_run();
  const SafetensorsFile enc = read_safetensors(r.encoder);
  EXPECT_EQ(enc.metadata.at("kernel_sizes"), "3,2");
  ASSERT_NE(enc.find("convs.1.weight"), nullptr);
  EXPECT_EQ(enc.find("convs.1.weight")->shape, (Shape{8, 8, 2}));
  EXPECT_EQ(enc.tensors.size(), 8u);  // convs.{0,1}.{weight,bias}, norms.{0,1}.{weight,bias}
  expect_encoder_round_trip(r, "cnn", "mean");
}

// The train records' losses of a run's metrics.jsonl, in order.
std::vector<double> train_losses(const std::string& run) {
  std::ifstream in(run + "/metrics.jsonl");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("split", "") == "train" && j.contains("loss")) out.push_back(j.at("loss").get<double>());
  }
  return out;
}

// Every encoder tensor of run's last checkpoint holds exported's bytes (a frozen epoch changed
// none); returns how many there are.
size_t expect_encoder_kept(const std::string& run, const SafetensorsFile& exported) {
  const SafetensorsFile tuned = read_safetensors(run + "/checkpoints/last/model.safetensors");
  size_t encoder_tensors = 0;
  for (const auto& t : tuned.tensors) {
    if (!is_encoder_tensor(t.name)) continue;
    ++encoder_tensors;
    EXPECT_EQ(t.bytes, exported.at(t.name).bytes) << t.name << " changed in a frozen epoch";
  }
  return encoder_tensors;
}

// Masked pretraining on smooth series (the set's lengths; sines a conv can interpolate), then its
// encoder under a classifier: filled bit for bit, kept bit for bit through a frozen epoch; an
// encoder of another shape is refused.
TEST(CnnRun, MaskedPretrainingThenFineTuningFromItsEncoder) {
  TempDir dir;
  constexpr int64_t N = 48;
  std::vector<float> smooth(static_cast<size_t>(N * kSetT * kSetF), 0.f);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t t = 0; t < NpyClassSet::length(i); ++t)
      for (int64_t f = 0; f < kSetF; ++f)
        smooth[static_cast<size_t>((i * kSetT + t) * kSetF + f)] =
            std::sin(0.6f * float(t) + float(f) + 0.5f * float(i)) * (1.f + 0.2f * float(i % 3));
  write_npy(dir / "smooth_x.npy", smooth, {N, kSetT, kSetF});
  const std::string pre = dir / "pre";
  Result r = run_seqtrain("train " +
                          set_config(dir, "pre",
                                     "  task: masked_pretrain\n  epochs: 30\n  log_every: 3\n  masking:\n"
                                     "    patch_size: 2\n    std_penalty: 0.1\n") +
                          " --set data.npy.train_x=" + (dir / "smooth_x.npy") + " --quiet --out " + pre);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::vector<double> losses = train_losses(pre);
  ASSERT_GE(losses.size(), 4u);
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "the reconstruction loss does not fall";

  const std::string enc = dir / "enc.safetensors";
  const SafetensorsFile exported = export_pretrained_encoder(pre, enc);
  EXPECT_EQ(exported.metadata.at("family"), "cnn");

  // model.encoder_from's fill of the classifier the loop builds: the exported bytes exactly.
  ModelSpec s = load_model(pre).spec;
  s.reconstruct = false;
  s.output_size = kClasses;
  auto fresh = build_model(s), m = build_model(s);
  Rng a(1), b(1);
  fresh->init(a);
  m->init(b);
  const EncoderFromReport rep = encoder_from(enc, *m);
  EXPECT_EQ(rep.family, "cnn");
  EXPECT_EQ(rep.fresh, (std::vector<std::string>{"head.weight", "head.bias"}));
  expect_encoder_and_fresh_head(m->params(), exported, fresh->params());

  // Through the binary: one frozen epoch of fine-tuning keeps every encoder byte; the head trains.
  const std::string ft = dir / "ft";
  r = run_seqtrain("train " + set_config(dir, "ft", "  task: classify\n  loss: cross_entropy\n  epochs: 1\n"
                                                     "  freeze_encoder_epochs: 1\n") +
                   " --set model.encoder_from=" + enc + " --out " + ft);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "model.encoder_from: 8 cnn encoder tensors");
  EXPECT_EQ(expect_encoder_kept(ft, exported), 8u);

  // Another width: refused naming the tensor and both shapes, and no run directory is left.
  const std::string wide = dir / "wide";
  r = run_seqtrain("train " + set_config(dir, "wide", kClassify) + " --set model.hidden=12 --set model.encoder_from=" +
                   enc + " --quiet --out " + wide);
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_CONTAINS(r.out, "model.encoder_from");
  EXPECT_CONTAINS(r.out, "convs.0.weight");
  EXPECT_CONTAINS(r.out, "[8, 3, 3]");
  EXPECT_CONTAINS(r.out, "[12, 3, 3]");
  EXPECT_FALSE(fs::exists(wide));
}

// ---------------------------------------------------------------------------------------------
// model.norm batch through the binary

const std::string kBatchNorm = "  norm: batch\n";

const ExportedRun& batch_norm_run() {
  static ExportedRun r([](const TempDir& dir) { return set_config(dir, "cnn_bn", kClassify, kBatchNorm); });
  return r;
}

// The checkpoint loads into the mirror with strict=True (torch's int64 num_batches_tracked from our
// float) and its eval-mode logits (the trained running statistics) are seqtrain's; the exported
// encoder says norm batch and embeds in PyTorch as `seqtrain embed` does.
TEST(CnnBatchNormRun, CheckpointAndEncoderLoadIntoTheMirror) {
  SEQTRAIN_REQUIRE_TORCH();
  const ExportedRun& r = batch_norm_run();
  LoadedModel lm = load_model(r.run);
  EXPECT_EQ(lm.spec.norm, "batch");
  const SafetensorsFile ckpt = read_safetensors(r.run + "/checkpoints/best/model.safetensors");
  const std::vector<float> nbt = ckpt.at("norms.1.num_batches_tracked").to_f32();
  ASSERT_EQ(nbt.size(), 1u);
  EXPECT_GT(nbt[0], 0.f);
  EXPECT_NE(ckpt.at("norms.0.running_var").to_f32(), std::vector<float>(8, 1.f)) << "statistics never updated";
  expect_logits_match_the_mirror(r, lm);
  const SafetensorsFile enc = read_safetensors(r.encoder);
  EXPECT_EQ(enc.metadata.at("norm"), "batch");
  EXPECT_EQ(enc.tensors.size(), 14u);  // convs.{0,1}.{weight,bias}, norms.{0,1}.{weight,bias,3 statistics}
  expect_encoder_round_trip(r, "cnn", "mean");
}

// Stopped mid-epoch and at an epoch's end, with train.ema_decay (whose average follows the
// statistics instead of averaging them) and train.grad_accum (statistics per micro-batch): the
// resumed run ends with the uninterrupted run's weights, statistics and moments, bit for bit, and
// the checkpoint's num_batches_tracked counts the micro-batches, a whole number.
TEST(CnnBatchNormRun, ResumeIsBitIdentical) {
  TempDir dir;
  const Config c = load_config(set_config(dir, "bn_resume",
                                          "  task: classify\n  loss: cross_entropy\n  epochs: 3\n  grad_accum: 2\n"
                                          "  ema_decay: 0.9\n  log_every: 1\n",
                                          kBatchNorm));
  const TrainSummary full = train(c, TrainOptions(dir / "full", false, false, true));
  const std::string last = dir / "full/checkpoints/last/model.safetensors";
  const float nbt = read_safetensors(last).at("norms.0.num_batches_tracked").to_f32().at(0);
  EXPECT_EQ(nbt, std::round(nbt));
  EXPECT_EQ(static_cast<int64_t>(nbt), full.steps * 2) << "one statistics update per micro-batch";
  struct Cut {
    int64_t update, epoch;
  };
  for (const Cut cut : {Cut{2, -1}, Cut{-1, 0}}) {
    const std::string run = dir / ("cut" + std::to_string(cut.update) + "_" + std::to_string(cut.epoch));
    ASSERT_EQ(train_stopped_at(c, run, cut.update, cut.epoch).stopped_by, "stop_token");
    const TrainSummary resumed = train(c, TrainOptions(run, true, false, true));
    EXPECT_EQ(resumed.steps, full.steps);
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(cli::slurp(run + "/checkpoints/last/" + f), cli::slurp(dir / ("full/checkpoints/last/" + std::string(f))))
          << f << ", stopped at update " << cut.update << " / epoch " << cut.epoch;
  }
}

// A BatchNorm encoder under a classifier: a frozen fine-tuning epoch keeps every encoder byte, the
// running statistics included; a LayerNorm classifier refuses it naming the tensor it lacks, and
// writes nothing.
TEST(CnnBatchNormRun, FrozenEpochsKeepEveryEncoderByteAndTheOtherNormIsRefused) {
  const ExportedRun& r = batch_norm_run();
  const SafetensorsFile exported = read_safetensors(r.encoder);
  TempDir dir;
  const std::string ft = dir / "ft";
  cli::Result out = run_seqtrain("train " +
                                 set_config(dir, "ft", "  task: classify\n  loss: cross_entropy\n  epochs: 1\n"
                                                       "  freeze_encoder_epochs: 1\n", kBatchNorm) +
                                 " --set model.encoder_from=" + r.encoder + " --quiet --out " + ft);
  ASSERT_EQ(out.rc, 0) << out.out;
  EXPECT_EQ(expect_encoder_kept(ft, exported), 14u);
  // After the frozen epoch the encoder trains, and its statistics move (buffers never train, but
  // BatchNorm updates them).
  const std::string ft2 = dir / "ft2";
  out = run_seqtrain("train " +
                     set_config(dir, "ft2", "  task: classify\n  loss: cross_entropy\n  epochs: 2\n"
                                            "  freeze_encoder_epochs: 1\n", kBatchNorm) +
                     " --set model.encoder_from=" + r.encoder + " --quiet --out " + ft2);
  ASSERT_EQ(out.rc, 0) << out.out;
  const SafetensorsFile tuned2 = read_safetensors(ft2 + "/checkpoints/last/model.safetensors");
  EXPECT_NE(tuned2.at("norms.0.running_mean").bytes, exported.at("norms.0.running_mean").bytes);
  EXPECT_NE(tuned2.at("convs.0.weight").bytes, exported.at("convs.0.weight").bytes);

  const std::string layer = dir / "layer";
  out = run_seqtrain("train " + set_config(dir, "layer", kClassify) + " --set model.encoder_from=" + r.encoder +
                     " --quiet --out " + layer);
  EXPECT_NE(out.rc, 0) << out.out;
  EXPECT_CONTAINS(out.out, "model.encoder_from");
  EXPECT_CONTAINS(out.out, "norms.0.running_mean");
  EXPECT_CONTAINS(out.out, "model.norm");
  EXPECT_FALSE(fs::exists(layer));
}

}  // namespace
}  // namespace seqtrain::testing
