// The transformer layers every family shares (nn/self_attention.h, nn/transformer_block.h) on
// padded batches, and model.type transformer (models/transformer_encoder.h):
// - SelfAttention (non-causal, key padding) against torch's nn.MultiheadAttention and the
//   TransformerBlock against nn.TransformerEncoderLayer(norm_first=True, activation="gelu",
//   batch_first=True, dropout=0) with src_key_padding_mask, float64 torch through
//   tests/py/transformer_ref.py: outputs, the input gradient and every parameter gradient, on a
//   batch whose lengths all differ; SelfAttention also against central finite differences of a
//   double forward written here;
// - the whole encoder (each pooling, each positions mode, patch_size 2) against its python mirror
//   (python/seqtrain_torch/transformer.py, loaded strict from the weights seqtrain saved);
// - values at padded steps change no pooled output and no parameter gradient; with positions none
//   the pooled output does not depend on the order of a set's elements;
// - padded batches run their blocks on the packed valid tokens: the padded path's numbers up to
//   rounding; lengths that pad no token change no number;
// - gradient checkpointing changes no number; bad settings are errors naming their config key.
// Tolerances: as tests/test_gpt_layers.cpp, 1e-5 of each tensor's scale for fp32 against float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/gemm_bf16.h"
#include "backend/precision.h"
#include "config/config.h"
#include "guarded_backend.h"
#include "mirror_parity.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "models/summary.h"
#include "models/transformer_encoder.h"
#include "nn/self_attention.h"
#include "nn/transformer_block.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

std::vector<uint8_t> padding_mask(const std::vector<int64_t>& lengths, int64_t T) {
  std::vector<uint8_t> m(lengths.size() * T);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t t = 0; t < T; ++t) m[b * T + t] = t >= lengths[b];
  return m;
}

void randomize(ParamStore& ps, Rng& rng, float scale) {
  const std::vector<float> p = randn(rng, static_cast<int64_t>(ps.size()), scale);
  std::copy(p.begin(), p.end(), ps.params());
  ps.zero_grad();
}

Tensor copy_in(Arena& arena, const std::vector<float>& v, Shape shape) {
  Tensor t = arena.tensor(std::move(shape));
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

std::vector<float> grad_of(const ParamStore& ps, const ParamEntry& e) {
  const float* g = ps.grads() + e.offset;
  return std::vector<float>(g, g + numel_of(e.shape));
}

// A layer's one forward and backward on x and dy [B, T, C] with the padding of `lengths`.
struct LayerPass {
  std::vector<float> x, dy, y, dx;
};

// The layer's outputs, input gradient and every parameter gradient against torch's module
// (transformer_ref.py `mode`), within 1e-5 relative.
void expect_torch_parity(const std::string& mode, const ParamStore& ps, const LayerPass& got,
                         const std::vector<int64_t>& lengths, Shape shape, int64_t heads) {
  TempDir dir;
  save_params(dir / "params.safetensors", ps);
  write_npy(dir / "x.npy", got.x, shape);
  write_npy(dir / "dy.npy", got.dy, shape);
  write_npy(dir / "lengths.npy", lengths, {static_cast<int64_t>(lengths.size())});
  ASSERT_EQ(run_python("transformer_ref.py", mode + " " + dir.path.string() + " --heads " + std::to_string(heads)), 0);
  EXPECT_LT(rel_err(got.y, read_npy(dir / "y.npy")), 1e-5) << "y";
  EXPECT_LT(rel_err(got.dx, read_npy(dir / "dx.npy")), 1e-5) << "dx";
  for (const ParamEntry& e : ps.entries())
    EXPECT_LT(rel_err(grad_of(ps, e), read_npy(dir / ("grad_" + e.name + ".npy"))), 1e-5) << e.name;
}

const std::vector<int64_t> kLengths{6, 4, 1};  // B = 3, T = 6: full, partly padded, one step
constexpr int64_t kB = 3, kT = 6, kC = 8, kH = 2;

SelfAttentionOptions encoder_attention() {
  return SelfAttentionOptions{.n_head = kH, .causal = false, .names = AttentionNames::torch()};
}

LayerPass run_layer(const std::function<Tensor(const Tensor&, Arena&, const uint8_t*)>& forward,
                    const std::function<Tensor(const Tensor&, Arena&)>& backward, Rng& rng,
                    const std::vector<int64_t>& lengths) {
  LayerPass p;
  p.x = randn(rng, kB * kT * kC);
  p.dy = randn(rng, kB * kT * kC);
  const std::vector<uint8_t> mask = padding_mask(lengths, kT);
  Arena arena;
  p.y = values(forward(copy_in(arena, p.x, {kB, kT, kC}), arena, mask.data()));
  p.dx = values(backward(copy_in(arena, p.dy, {kB, kT, kC}), arena));
  return p;
}

TEST(EncoderSelfAttention, KeyPaddingMatchesTorchMultiheadAttention) {
  SEQTRAIN_REQUIRE_TORCH();
  ParamStore ps;
  SelfAttention attn(ps, "self_attn", kC, encoder_attention());
  ps.finalize();
  EXPECT_NE(ps.find("self_attn.in_proj_weight"), nullptr);
  EXPECT_NE(ps.find("self_attn.out_proj.bias"), nullptr);
  Rng rng(31);
  randomize(ps, rng, 0.4f);
  const LayerPass p = run_layer(
      [&](const Tensor& x, Arena& a, const uint8_t* m) { return attn.forward(x, a, true, 7, m); },
      [&](const Tensor& dy, Arena& a) { return attn.backward(dy, a); }, rng, kLengths);
  expect_torch_parity("attn", ps, p, kLengths, {kB, kT, kC}, kH);
}

TEST(EncoderBlock, KeyPaddingMatchesTorchTransformerEncoderLayer) {
  SEQTRAIN_REQUIRE_TORCH();
  ParamStore ps;
  TransformerBlock block(ps, "layer",
                         TransformerBlockOptions{.n_embd = kC,
                                                 .n_head = kH,
                                                 .causal = false,
                                                 .dropout_after_gelu = true,
                                                 .names = TransformerBlockNames::torch_encoder()});
  ps.finalize();
  for (const char* name : {"layer.norm1.weight", "layer.self_attn.in_proj_bias", "layer.linear1.weight",
                           "layer.linear2.bias", "layer.norm2.bias"})
    EXPECT_NE(ps.find(name), nullptr) << name;
  Rng rng(32);
  randomize(ps, rng, 0.4f);
  Arena scratch;
  const LayerPass p = run_layer(
      [&](const Tensor& x, Arena& a, const uint8_t* m) { return block.forward(x, a, scratch, true, 7, m); },
      [&](const Tensor& dy, Arena& a) { return block.backward(dy, a, scratch); }, rng, kLengths);
  expect_torch_parity("layer", ps, p, kLengths, {kB, kT, kC}, kH);
}

// New values at padded steps change no valid step's output and, with the gradient zero at padded
// steps (nothing reads them), no parameter gradient: for the attention and the whole block.
TEST(EncoderBlock, PaddedStepsChangeNoValidOutputAndNoGradient) {
  ParamStore ps;
  TransformerBlock block(ps, "layer",
                         TransformerBlockOptions{.n_embd = kC,
                                                 .n_head = kH,
                                                 .causal = false,
                                                 .dropout_after_gelu = true,
                                                 .names = TransformerBlockNames::torch_encoder()});
  ps.finalize();
  Rng rng(34);
  randomize(ps, rng, 0.4f);
  std::vector<float> x = randn(rng, kB * kT * kC), dy = randn(rng, kB * kT * kC);
  const std::vector<uint8_t> mask = padding_mask(kLengths, kT);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] *= mask[i / kC] ? 0.f : 1.f;
  std::vector<float> y[2], grads[2];
  for (int k = 0; k < 2; ++k) {
    if (k == 1)
      for (size_t i = 0; i < x.size(); ++i) x[i] = mask[i / kC] ? 50.f * rng.normal() : x[i];
    Arena arena, scratch;
    ps.zero_grad();
    y[k] = values(block.forward(copy_in(arena, x, {kB, kT, kC}), arena, scratch, true, 7, mask.data()));
    block.backward(copy_in(arena, dy, {kB, kT, kC}), arena, scratch);
    grads[k].assign(ps.grads(), ps.grads() + ps.size());
    for (size_t i = 0; i < y[k].size(); ++i) y[k][i] *= mask[i / kC] ? 0.f : 1.f;  // valid steps only
  }
  EXPECT_EQ(y[0], y[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

// Non-causal attention with key padding in double, straight from the definition.
std::vector<double> attention_ref(const std::vector<double>& x, const std::vector<double>& wa,
                                  const std::vector<double>& ba, const std::vector<double>& wp,
                                  const std::vector<double>& bp, const std::vector<int64_t>& lengths) {
  const int64_t B = kB, T = kT, C = kC, H = kH, D = C / H;
  std::vector<double> qkv(B * T * 3 * C), y(B * T * C, 0.0), out(B * T * C);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t o = 0; o < 3 * C; ++o) {
      double s = ba[o];
      for (int64_t k = 0; k < C; ++k) s += x[n * C + k] * wa[o * C + k];
      qkv[n * 3 * C + o] = s;
    }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t n = lengths[b];
        std::vector<double> p(n);
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += qkv[(b * T + i) * 3 * C + h * D + d] * qkv[(b * T + j) * 3 * C + C + h * D + d];
          m = std::max(m, p[j] = s / std::sqrt(double(D)));
        }
        for (int64_t j = 0; j < n; ++j) l += p[j] = std::exp(p[j] - m);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t d = 0; d < D; ++d)
            y[(b * T + i) * C + h * D + d] += p[j] / l * qkv[(b * T + j) * 3 * C + 2 * C + h * D + d];
      }
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t o = 0; o < C; ++o) {
      double s = bp[o];
      for (int64_t k = 0; k < C; ++k) s += y[n * C + k] * wp[o * C + k];
      out[n * C + o] = s;
    }
  return out;
}

TEST(EncoderSelfAttention, KeyPaddingMatchesFiniteDifferences) {
  ParamStore ps;
  SelfAttention attn(ps, "self_attn", kC, encoder_attention());
  ps.finalize();
  Rng rng(33);
  randomize(ps, rng, 0.4f);
  const LayerPass p = run_layer(
      [&](const Tensor& x, Arena& a, const uint8_t* m) { return attn.forward(x, a, true, 7, m); },
      [&](const Tensor& dy, Arena& a) { return attn.backward(dy, a); }, rng, kLengths);
  auto param = [&](size_t i) { return to_double(ps.param(i).f32(), ps.param(i).numel()); };
  std::vector<double> x = to_double(p.x), r = to_double(p.dy);
  std::vector<double> wa = param(attn.in_proj.weight), ba = param(attn.in_proj.bias);
  std::vector<double> wp = param(attn.out_proj.weight), bp = param(attn.out_proj.bias);
  auto L = [&] {
    const std::vector<double> y = attention_ref(x, wa, ba, wp, bp, kLengths);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  EXPECT_LT(rel_err(p.y, attention_ref(x, wa, ba, wp, bp, kLengths)), 1e-5) << "y";
  EXPECT_LT(rel_err(p.dx, numgrad(x, L)), 1e-4) << "dx";
  auto grad = [&](size_t i) { return grad_of(ps, ps.entries()[i]); };
  EXPECT_LT(rel_err(grad(attn.in_proj.weight), numgrad(wa, L)), 1e-4) << "in_proj_weight";
  EXPECT_LT(rel_err(grad(attn.in_proj.bias), numgrad(ba, L)), 1e-4) << "in_proj_bias";
  EXPECT_LT(rel_err(grad(attn.out_proj.weight), numgrad(wp, L)), 1e-4) << "out_proj.weight";
  EXPECT_LT(rel_err(grad(attn.out_proj.bias), numgrad(bp, L)), 1e-4) << "out_proj.bias";
}

// ---------------------------------------------------------------------------------------------
// The encoder model

ModelSpec encoder_spec(const std::string& pooling, const std::string& positions, int64_t patch) {
  ModelSpec s;
  s.type = "transformer";
  s.input_size = 3;
  s.lookback = 8;
  s.hidden = 8;
  s.layers = 2;
  s.heads = 2;
  s.output_size = 2;
  s.pooling = pooling;
  s.positions = positions;
  s.patch_size = patch;
  return s;
}

// A model with every parameter visibly away from its init (LayerNorm weights too).
std::unique_ptr<TransformerEncoder> random_encoder(const ModelSpec& spec, uint64_t seed, const ModelEnv& env = {}) {
  auto m = std::make_unique<TransformerEncoder>(spec, env);
  Rng rng(seed);
  m->init(rng);
  for (size_t i = 0; i < m->params().size(); ++i) m->params().params()[i] += 0.1f * rng.normal();
  return m;
}

// One forward and backward of the model on x [B, 8, 3] with `lengths` (empty: none) and dy.
ModelResult run_model(TransformerEncoder& m, std::vector<float> x, std::vector<int64_t> lengths,
                      const std::vector<float>& dy, bool training = false, uint64_t seed = 0) {
  const int64_t B = static_cast<int64_t>(x.size()) / (8 * 3);
  return run_model_pass(m, std::move(x), {B, 8, 3}, std::move(lengths), dy, training, seed);
}

struct ModelCase { const char* pooling; const char* positions; int64_t patch; };
class EncoderModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(EncoderModel, MatchesThePythonMirrorOnAPaddedBatch) {
  SEQTRAIN_REQUIRE_TORCH();
  const ModelCase c = GetParam();
  const ModelSpec spec = encoder_spec(c.pooling, c.positions, c.patch);
  auto m = random_encoder(spec, 41);
  Rng rng(42);
  const PaddedBatch p(rng);
  expect_mirror_parity(spec, m->params(), p.x, {4, 8, 3}, p.lengths, p.dy, run_model(*m, p.x, p.lengths, p.dy));
}

INSTANTIATE_TEST_SUITE_P(Encoder, EncoderModel,
                         ::testing::Values(ModelCase{"last", "auto", 1}, ModelCase{"mean", "sinusoidal", 2},
                                           ModelCase{"max", "none", 1}, ModelCase{"cls", "learned", 2},
                                           ModelCase{"cls", "sinusoidal", 1}, ModelCase{"mean", "none", 2},
                                           ModelCase{"last", "sinusoidal", 2}, ModelCase{"max", "auto", 2}),
                         [](const auto& i) {
                           return std::string(i.param.pooling) + "_" + i.param.positions + "_p" +
                                  std::to_string(i.param.patch);
                         });

// Steps in wholly padded patches are never read: new values there change no output and no
// parameter gradient, bit for bit (their rows' gradients are exact zeros). A patch with one valid
// step is no padding: its other steps are the token's input.
TEST(EncoderModelPadding, PaddedStepsChangeNoOutputAndNoGradient) {
  for (const char* pooling : {"last", "mean", "max", "cls"}) {
    auto m = random_encoder(encoder_spec(pooling, "auto", 2), 43);
    Rng rng(44);
    auto [p, b] = expect_unread_steps(*m, rng, [](int64_t len) { return (len + 1) / 2 * 2; }, pooling);
    p.x[(1 * 8 + 5) * 3] += 1.f;  // step 5 of a length-5 sample: padding, but in patch 2, whose step 4 is valid
    EXPECT_NE(run_model(*m, p.x, p.lengths, p.dy).y, b.y) << pooling;
  }
}

// Without positions the encoder sees a set: permuting a sample's valid elements changes the mean
// and max pooled output by rounding only.
TEST(EncoderModelPadding, WithoutPositionsTheOrderOfASetDoesNotMatter) {
  for (const char* pooling : {"mean", "max"}) {
    auto m = random_encoder(encoder_spec(pooling, "none", 1), 45);
    Rng rng(46);
    const std::vector<int64_t> lengths{8, 6};
    std::vector<float> x = randn(rng, 2 * 8 * 3);
    const std::vector<float> dy(2 * 2, 0.f);
    const std::vector<float> y = run_model(*m, x, lengths, dy).y;
    const std::vector<std::vector<int64_t>> orders{{3, 0, 7, 5, 1, 6, 2, 4}, {5, 2, 4, 0, 3, 1}};
    std::vector<float> xp = x;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < lengths[b]; ++t)
        std::copy_n(x.begin() + (b * 8 + orders[b][t]) * 3, 3, xp.begin() + (b * 8 + t) * 3);
    ASSERT_NE(xp, x);
    EXPECT_LT(rel_err(run_model(*m, xp, lengths, dy).y, y), 1e-6) << pooling;
  }
}

// A padded batch runs its blocks, final norm and pooling on the packed valid tokens: the outputs
// and every gradient are the padded path's (set_packing(false)) up to rounding, for each pooling,
// patches and the cls token included, and under gradient checkpointing.
TEST(EncoderModelPacking, MatchesThePaddedPath) {
  for (const char* pooling : {"last", "mean", "max", "cls"})
    for (const bool checkpoint : {false, true}) {
      ModelSpec spec = encoder_spec(pooling, "auto", 2);
      spec.grad_checkpoint = checkpoint;
      auto packed = random_encoder(spec, 55), padded = random_encoder(spec, 55);
      padded->set_packing(false);
      Rng rng(56);
      const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
      const ModelResult a = run_model(*packed, x, {8, 5, 2, 7}, dy, true, 3);
      const ModelResult b = run_model(*padded, x, {8, 5, 2, 7}, dy, true, 3);
      EXPECT_LT(rel_err(a.y, b.y), 1e-6) << pooling << " checkpoint " << checkpoint;
      EXPECT_LT(rel_err(a.grads, b.grads), 1e-6) << pooling << " checkpoint " << checkpoint;
    }
}

// Lengths that pad no token (every sample whole, or short only inside its last patch) take the
// unpacked path: every number as without lengths, bit for bit.
TEST(EncoderModelPacking, LengthsThatPadNoTokenChangeNoNumber) {
  auto m = random_encoder(encoder_spec("mean", "auto", 2), 57);
  Rng rng(58);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  const ModelResult none = run_model(*m, x, {}, dy);
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{8, 8, 8, 8}, std::vector<int64_t>{8, 7, 8, 7}}) {
    const ModelResult r = run_model(*m, x, lengths, dy);
    EXPECT_EQ(r.y, none.y);
    EXPECT_EQ(r.grads, none.grads);
  }
}

// Packed dropout masks are keyed by packed row: the same seed gives the same numbers, another
// seed others.
TEST(EncoderModelPacking, DropoutIsDeterministic) {
  ModelSpec spec = encoder_spec("mean", "auto", 1);
  spec.dropout = 0.2f;
  auto m = random_encoder(spec, 59);
  Rng rng(60);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  const ModelResult a = run_model(*m, x, {8, 5, 2, 7}, dy, true, 11);
  const ModelResult b = run_model(*m, x, {8, 5, 2, 7}, dy, true, 11);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_NE(run_model(*m, x, {8, 5, 2, 7}, dy, true, 12).y, a.y);
}

// Recomputing each block inside backward gives the same outputs and gradients, dropout on.
TEST(EncoderModelCheckpointing, ChangesNoNumber) {
  ModelSpec spec = encoder_spec("mean", "auto", 2);
  spec.dropout = 0.1f;
  auto plain = random_encoder(spec, 47);
  spec.grad_checkpoint = true;
  auto ckpt = random_encoder(spec, 47);
  Rng rng(48);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  const ModelResult a = run_model(*plain, x, {8, 5, 2, 7}, dy, true, 9);
  const ModelResult b = run_model(*ckpt, x, {8, 5, 2, 7}, dy, true, 9);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_NE(a.y, run_model(*plain, x, {8, 5, 2, 7}, dy, false).y) << "dropout was on";
}

// Under the bf16 policy the blocks' products run in bf16: outputs and gradients differ from fp32's
// by bf16 rounding (not zero, which would mean fp32 ran).
TEST(EncoderModelBf16, TheBlocksFollowThePolicy) {
  if (!cpu_has_native_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  const ModelSpec spec = encoder_spec("max", "sinusoidal", 2);
  auto f32 = random_encoder(spec, 49);
  auto bf = random_encoder(spec, 49, ModelEnv{.precision = resolve_precision("bf16")});
  Rng rng(50);
  const std::vector<float> x = randn(rng, 4 * 8 * 3), dy = randn(rng, 4 * 2);
  const ModelResult a = run_model(*f32, x, {8, 5, 2, 7}, dy), b = run_model(*bf, x, {8, 5, 2, 7}, dy);
  const double ey = rel_err(b.y, a.y), eg = rel_err(b.grads, a.grads);
  std::printf("[ bf16 ] transformer encoder vs fp32: outputs %.2e, gradients %.2e\n", ey, eg);
  EXPECT_GT(ey, 1e-6);
  EXPECT_LT(ey, 2e-2);
  EXPECT_LT(eg, 5e-2);
}

// Through the training step on a padded batch (lengths read from the host batch): a set
// classification (is the mean of feature 0 over the valid steps positive?) is learned.
TEST(EncoderTraining, LearnsAPaddedClassification) {
  ModelSpec spec = encoder_spec("mean", "none", 1);
  spec.output_size = 2;
  auto m = random_encoder(spec, 51);
  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3});
  opt->set_decay_mask(m->params().decay_mask());
  auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 3e-3});
  TrainStep step(*m, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
  Rng rng(52);
  const int64_t B = 16;
  std::vector<double> losses;
  for (int64_t s = 0; s < 150; ++s) {
    std::vector<float> x = randn(rng, B * 8 * 3);
    std::vector<int64_t> lengths(B), labels(B);
    for (int64_t b = 0; b < B; ++b) {
      lengths[b] = 1 + static_cast<int64_t>(rng.below(8));
      double sum = 0;
      for (int64_t t = 0; t < lengths[b]; ++t) sum += x[(b * 8 + t) * 3];
      labels[b] = sum > 0;
    }
    Batch batch = batch_of(Tensor(x.data(), {B, 8, 3}));
    batch.targets = Tensor(labels.data(), {B}, DType::i64);
    batch.lengths = Tensor(lengths.data(), {B}, DType::i64);
    step.run(batch, static_cast<uint64_t>(s));
    losses.push_back(step.take_loss());
  }
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[147] + losses[148] + losses[149]) / 3;
  std::printf("[ train ] padded set classification: loss %.3f -> %.3f\n", first, last);
  EXPECT_LT(last, 0.5 * first);
}

// On a backend whose memory the host cannot touch (GuardedBackend: a stray host access faults)
// the encoder trains bit for bit as on the reference backend it wraps: the token mask goes up by
// Backend::upload, pooling and the cls token run on the backend's ops. Max pooling, host loops
// for now, refuses such a backend by name.
TEST(EncoderOnADevice, GuardedBackendTrainsBitwiseLikeTheReference) {
  for (const char* pooling : {"mean", "cls", "last", "max"}) {
    ModelSpec spec = encoder_spec(pooling, "sinusoidal", 2);
    spec.dropout = 0.1f;
    spec.backend = "reference";
    GuardedBackend g(backend_named("reference"));
    TransformerEncoder plain(spec), guarded(spec, ModelEnv{.backend = &g});
    std::vector<std::vector<double>> losses(2);
    std::vector<std::vector<float>> weights(2);
    TransformerEncoder* models[2] = {&plain, &guarded};
    Rng data(54);
    const std::vector<float> x = randn(data, 4 * 8 * 3), y = randn(data, 4 * 2);
    std::vector<int64_t> lengths{8, 5, 2, 7};
    Batch batch = batch_of(Tensor(const_cast<float*>(x.data()), {4, 8, 3}));
    batch.targets = Tensor(const_cast<float*>(y.data()), {4, 2});
    batch.lengths = Tensor(lengths.data(), {4}, DType::i64);
    for (int k = 0; k < 2; ++k) {
      Rng rng(53);
      models[k]->init(rng);
      auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 1e-2}, models[k]->params().backend());
      auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 1e-2});
      TrainStep step(*models[k], *opt, *sched, StepOptions{LossKind::mse, {}, 1.0, 1});
      if (std::string(pooling) == "max" && k == 1) {
        EXPECT_CONTAINS(error_of([&] { step.run(batch, 0); }), "runtime.device: cpu");
        continue;
      }
      for (uint64_t s = 0; s < 4; ++s) {
        step.run(batch, s);
        losses[k].push_back(step.take_loss());
      }
      const HostReadView w = models[k]->params().read_view();
      weights[k].assign(w.data(), w.data() + w.size());
    }
    if (std::string(pooling) == "max") continue;
    EXPECT_EQ(losses[0], losses[1]) << pooling;
    EXPECT_EQ(weights[0], weights[1]) << pooling;
    EXPECT_NE(losses[0].front(), losses[0].back()) << pooling;
  }
}

// The summary lists every layer and owns every parameter (the bare cls_token too).
TEST(EncoderSummary, EveryParameterHasItsLayer) {
  for (const char* pooling : {"cls", "mean"}) {
    const ModelSpec spec = encoder_spec(pooling, "auto", 2);
    TransformerEncoder m(spec);
    int64_t total = 0;
    for (const SummaryRow& r : summarize(spec, m.params())) {
      EXPECT_NE(r.name, "(other)") << pooling;
      total += r.params;
    }
    EXPECT_EQ(total, static_cast<int64_t>(m.params().size())) << pooling;
  }
}

// ---------------------------------------------------------------------------------------------
// Settings

std::optional<std::pair<std::string, std::string>> settings(const std::string& type,
                                                             const std::function<void(ModelSpec&)>& set) {
  ModelSpec s;
  s.hidden = 8;
  s.heads = 2;
  set(s);
  const ModelFamily& f = family(type);
  return f.check_settings ? f.check_settings(s) : std::nullopt;
}

TEST(EncoderSettings, BadSettingsNameTheirKey) {
  auto heads = settings("transformer", [](ModelSpec& s) { s.heads = 3; });
  ASSERT_TRUE(heads);
  EXPECT_EQ(heads->first, "model.heads");
  EXPECT_CONTAINS(heads->second, "divisors of 8");
  auto cls = settings("lstm", [](ModelSpec& s) { s.pooling = "cls"; });
  ASSERT_TRUE(cls);
  EXPECT_EQ(cls->first, "model.pooling");
  EXPECT_CONTAINS(cls->second, "transformer");
  EXPECT_FALSE(settings("gru", [](ModelSpec& s) { s.pooling = "max"; })) << "the RNNs pool last, mean or max";
  EXPECT_EQ(settings("mlp", [](ModelSpec& s) { s.pooling = "mean"; })->first, "model.pooling");
  for (const char* type : {"gpt", "lstm", "char_gru", "mlp"}) {
    auto pos = settings(type, [](ModelSpec& s) { s.positions = "sinusoidal"; });
    ASSERT_TRUE(pos) << type;
    EXPECT_EQ(pos->first, "model.positions") << type;
    EXPECT_EQ(settings(type, [](ModelSpec& s) { s.patch_size = 2; })->first, "model.patch_size") << type;
  }
  EXPECT_FALSE(settings("transformer", [](ModelSpec& s) {
    s.pooling = "cls";
    s.positions = "sinusoidal";
    s.patch_size = 4;
  }));
  // patch_size must divide the steps: the window's (at build) and a batch's (at forward).
  ModelSpec bad = encoder_spec("last", "auto", 3);
  EXPECT_CONTAINS(error_of([&] { TransformerEncoder m(bad); }), "model.patch_size");
  auto m = random_encoder(encoder_spec("last", "auto", 2), 1);
  std::vector<float> x(2 * 7 * 3, 0.f);
  Arena arena;
  StepContext ctx(arena);
  EXPECT_CONTAINS(error_of([&] { m->forward(batch_of(Tensor(x.data(), {2, 7, 3})), ctx); }), "model.patch_size");
  // Through a config, the key's line.
  TempDir dir;
  const std::string cfg = write_file(dir, "m.yaml", "model:\n  type: lstm\n  pooling: cls\n");
  const std::string e = error_of([&] { load_config(cfg); });
  EXPECT_CONTAINS(e, "m.yaml:3:");
  EXPECT_CONTAINS(e, "model.pooling");
}

}  // namespace
}  // namespace seqtrain::testing
