// The GPT model (models/gpt.h) against PyTorch (python/seqtrain_torch/gpt.py through
// tests/py/gpt_ref.py, Debian's torch 1.13 in float64): logits, loss and every gradient of one
// forward/backward, and a 100-step AdamW run from the same weights and batches; then the
// pieces only seqtrain has: the KV-cache generator equals the full forward at every position
// (also past the block size), gradient checkpointing changes no number and holds less memory,
// the tied head is one tensor saved under both names, and bad specs are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "config/config.h"
#include "io/safetensors.h"
#include "model_pass.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

ModelSpec gpt_spec(int64_t vocab, int64_t block, int64_t layers, int64_t heads, int64_t embd, bool bias = true) {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = vocab;
  s.lookback = block;
  s.layers = layers;
  s.heads = heads;
  s.hidden = embd;
  s.bias = bias;
  s.input_size = 1;
  s.output_size = block;
  return s;
}

std::string ref_args(const ModelSpec& s) {
  return fmt::format(" --vocab {} --block {} --n-layer {} --n-head {} --n-embd {} --bias {}", s.vocab_size, s.lookback,
                     s.layers, s.heads, s.hidden, s.bias ? 1 : 0);
}

std::vector<int64_t> random_ids(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<int64_t> v(n);
  for (auto& x : v) x = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab)));
  return v;
}

// Mean cross-entropy of logits [N, V] against targets, and d(loss)/d(logits), in double.
double cross_entropy(const float* logits, const std::vector<int64_t>& y, int64_t V, std::vector<float>& dlogits) {
  const int64_t N = static_cast<int64_t>(y.size());
  dlogits.assign(N * V, 0.f);
  double loss = 0;
  for (int64_t i = 0; i < N; ++i) {
    const float* z = logits + i * V;
    double mx = z[0], sum = 0;
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(z[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - mx);
    loss += std::log(sum) + mx - z[y[i]];
    for (int64_t v = 0; v < V; ++v)
      dlogits[i * V + v] = static_cast<float>((std::exp(z[v] - mx) / sum - (v == y[i] ? 1.0 : 0.0)) / N);
  }
  return loss / N;
}

struct GptParityCase { const char* name; int64_t layers, heads, embd; bool bias; int64_t T; };
class GptTorch : public ::testing::TestWithParam<GptParityCase> {};

TEST_P(GptTorch, LogitsLossAndEveryGradientMatchPyTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const GptParityCase c = GetParam();
  const int64_t V = 11, block = 8, B = 3;
  const ModelSpec spec = gpt_spec(V, block, c.layers, c.heads, c.embd, c.bias);
  Gpt m(spec);
  Rng rng(17);
  m.init(rng);
  // Larger than nanoGPT's 0.02 init so every layer's contribution is visible in the logits.
  for (size_t i = 0; i < m.params().size(); ++i) m.params().params()[i] += 0.1f * rng.normal();
  const std::vector<int64_t> idx = random_ids(rng, B * c.T, V), tgt = random_ids(rng, B * c.T, V);
  TempDir dir;
  save_params(dir / "model.safetensors", m.params());
  write_npy(dir / "idx.npy", idx, {B, c.T});
  write_npy(dir / "targets.npy", tgt, {B, c.T});
  ASSERT_EQ(run_python("gpt_ref.py", "grad " + dir.path.string() + ref_args(spec)), 0);

  Arena arena;
  ModelPass pass(m, arena, true);
  Tensor logits = pass.forward(Tensor(const_cast<int64_t*>(idx.data()), {B, c.T}, DType::i64));
  std::vector<float> dl;
  const double loss = cross_entropy(logits.f32(), tgt, V, dl);
  m.params().zero_grad();
  pass.backward(Tensor(dl.data(), logits.shape));

  EXPECT_LT(rel_err(std::vector<float>(logits.f32(), logits.f32() + logits.numel()), read_npy(dir / "logits.npy")), 1e-5);
  EXPECT_NEAR(loss, read_npy(dir / "loss.npy")[0], 1e-5 * loss);
  for (const ParamEntry& e : m.params().entries()) {
    const float* g = m.params().grads() + e.offset;
    EXPECT_LT(rel_err(std::vector<float>(g, g + numel_of(e.shape)), read_npy(dir / ("grad_" + e.name + ".npy"))), 1e-5)
        << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptTorch,
                         ::testing::Values(GptParityCase{"L2H2C16", 2, 2, 16, true, 8},
                                           GptParityCase{"L1H3C12_nobias_short", 1, 3, 12, false, 5},
                                           GptParityCase{"L3H1C8", 3, 1, 8, true, 7}),
                         [](const auto& i) { return std::string(i.param.name); });

// 100 AdamW steps (betas 0.9/0.99, weight decay 0.1 on 2-D tensors only, clipping at 1, warmup
// + cosine) from the same weights on the same batches: every step's loss within 1e-4 relative
// of PyTorch's (float32 on both sides) and the final weights close.
TEST(GptTorchTraining, HundredAdamWStepsMatchPyTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const int64_t V = 13, block = 8, B = 4, T = 8, N = 100;
  ModelSpec spec = gpt_spec(V, block, 2, 2, 16);
  spec.decay = "2d";
  Gpt m(spec);
  Rng rng(23);
  m.init(rng);
  TempDir dir;
  save_params(dir / "model.safetensors", m.params());
  // A learnable stream: each next token is a fixed function of the current one, plus noise.
  std::vector<int64_t> bx(N * B * T), by(N * B * T);
  for (int64_t i = 0; i < N * B; ++i) {
    int64_t t0 = static_cast<int64_t>(rng.below(V));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t next = rng.uniform() < 0.8f ? (t0 * 3 + 1) % V : static_cast<int64_t>(rng.below(V));
      bx[i * T + t] = t0;
      by[i * T + t] = next;
      t0 = next;
    }
  }
  write_npy(dir / "batches_idx.npy", bx, {N, B, T});
  write_npy(dir / "batches_tgt.npy", by, {N, B, T});
  ASSERT_EQ(run_python("gpt_ref.py", "train " + dir.path.string() + ref_args(spec) +
                                         " --lr 3e-3 --beta2 0.99 --weight-decay 0.1 --clip 1.0 --schedule cosine "
                                         "--warmup 10 --total 100 --min-lr 3e-4"),
            0);
  const std::vector<double> want = read_npy(dir / "losses.npy");
  ASSERT_EQ(want.size(), static_cast<size_t>(N));

  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3, .beta2 = 0.99, .weight_decay = 0.1});
  opt->set_decay_mask(m.params().decay_mask());
  auto sched = make_schedule(
      ScheduleOptions{.name = "cosine", .base_lr = 3e-3, .warmup_steps = 10, .total_steps = 100, .min_lr = 3e-4});
  TrainStep step(m, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
  for (int64_t s = 0; s < N; ++s) {
    step.run(Tensor(bx.data() + s * B * T, {B, T}, DType::i64), Tensor(by.data() + s * B * T, {B, T}, DType::i64), s);
    const double got = step.take_loss();
    ASSERT_NEAR(got, want[s], 1e-4 * want[s]) << "step " << s;
  }
  EXPECT_LT(want.back(), 0.7 * want.front()) << "the run learns, so the comparison is not of a flat loss";
  ParamStore ref = m.params().clone_layout();
  load_params(dir / "final.safetensors", ref);
  EXPECT_LT(rel_err(std::vector<float>(m.params().params(), m.params().params() + m.params().size()),
                    std::vector<float>(ref.params(), ref.params() + ref.size())),
            1e-4);
}

// The KV-cache generator gives the logits of the full forward at every position, and past the
// block size those of the forward over the last `block` tokens (nanoGPT's crop).
TEST(Gpt, KvCacheGenerationEqualsTheFullForwardAtEveryPosition) {
  const int64_t V = 9, block = 6;
  Gpt m(gpt_spec(V, block, 2, 2, 8));
  Rng rng(4);
  m.init(rng);
  for (size_t i = 0; i < m.params().size(); ++i) m.params().params()[i] += 0.2f * rng.normal();
  const std::vector<int64_t> ids = random_ids(rng, 10, V);
  auto state = m.begin();
  std::vector<float> step_logits(V);
  for (int64_t t = 0; t < 10; ++t) {
    m.next_logits(*state, ids[t], step_logits.data());
    const int64_t lo = std::max<int64_t>(0, t + 1 - block);
    Arena arena;
    Tensor full = ModelPass(m, arena, false)
                      .forward(Tensor(const_cast<int64_t*>(ids.data()) + lo, {1, t + 1 - lo}, DType::i64));
    const float* last = full.f32() + (t - lo) * V;
    EXPECT_LT(rel_err(step_logits, std::vector<float>(last, last + V)), 1e-5) << "position " << t;
  }
  EXPECT_CONTAINS(error_of([&] { m.next_logits(*state, V, step_logits.data()); }), "outside the vocabulary of 9");
}

// Gradient checkpointing recomputes each block inside backward: the same logits and gradients
// (bitwise: the same kernels on the same inputs), with dropout on, and a smaller step arena.
TEST(Gpt, GradientCheckpointingChangesNoNumberAndHoldsLess) {
  ModelSpec spec = gpt_spec(10, 16, 3, 2, 16);
  spec.dropout = 0.1f;
  Gpt plain(spec);
  spec.grad_checkpoint = true;
  Gpt ckpt(spec);
  Rng rng(6);
  plain.init(rng);
  std::memcpy(ckpt.params().params(), plain.params().params(), plain.params().size() * sizeof(float));
  const std::vector<int64_t> ids = random_ids(rng, 4 * 16, 10);
  std::vector<float> dy(4 * 16 * 10);
  for (auto& v : dy) v = rng.normal();
  size_t held[2], scratch[2];
  std::vector<float> grads[2], out[2];
  Gpt* models[2] = {&plain, &ckpt};
  for (int k = 0; k < 2; ++k) {
    Arena arena;
    ModelPass pass(*models[k], arena, true, /*seed=*/5);
    Tensor y = pass.forward(Tensor(const_cast<int64_t*>(ids.data()), {4, 16}, DType::i64));
    out[k].assign(y.f32(), y.f32() + y.numel());
    pass.backward(Tensor(dy.data(), y.shape));
    grads[k].assign(models[k]->params().grads(), models[k]->params().grads() + models[k]->params().size());
    held[k] = arena.high_water();
    scratch[k] = pass.ctx.scratch_bytes;
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(scratch[0], 0u);
  EXPECT_GT(scratch[1], 0u);
  EXPECT_LT(held[1] + scratch[1], held[0]) << "checkpointing holds one block's activations, not three";
}

// One tensor for wte and the head: the optimizer sees it once, the file holds both names with
// the same bytes, and a file whose two copies differ is refused naming both.
TEST(Gpt, TiedHeadIsOneTensorSavedUnderBothNames) {
  Gpt m(gpt_spec(7, 4, 1, 1, 4, false));
  Rng rng(1);
  m.init(rng);
  EXPECT_EQ(m.params().find("lm_head.weight"), nullptr) << "not a second parameter";
  TempDir dir;
  save_params(dir / "m.safetensors", m.params());
  SafetensorsFile f = read_safetensors(dir / "m.safetensors");
  ASSERT_EQ(f.tensors.back().name, "lm_head.weight") << "last, as in nanoGPT's state_dict";
  EXPECT_EQ(f.at("lm_head.weight").bytes, f.at("transformer.wte.weight").bytes);
  Gpt back(gpt_spec(7, 4, 1, 1, 4, false));
  load_params(dir / "m.safetensors", back.params());
  EXPECT_EQ(0, std::memcmp(back.params().params(), m.params().params(), m.params().size() * sizeof(float)));
  // Tamper with the head's copy.
  std::vector<NamedTensor> ts = f.tensors;
  for (auto& t : ts)
    if (t.name == "lm_head.weight") t.bytes[0] ^= std::byte{1};
  write_safetensors(dir / "bad.safetensors", ts);
  const std::string e = error_of([&] { load_params(dir / "bad.safetensors", back.params()); });
  EXPECT_CONTAINS(e, "lm_head.weight");
  EXPECT_CONTAINS(e, "tied to 'transformer.wte.weight'");
}

TEST(Gpt, NanoGptInitAndDecayGroups) {
  ModelSpec spec = gpt_spec(50, 32, 4, 2, 64);
  spec.decay = "2d";
  Gpt m(spec);
  Rng rng(9);
  m.init(rng);
  auto stddev = [&](const std::string& name) {
    const ParamEntry* e = m.params().find(name);
    const float* p = m.params().params() + e->offset;
    double s = 0;
    for (int64_t i = 0; i < numel_of(e->shape); ++i) s += double(p[i]) * p[i];
    return std::sqrt(s / numel_of(e->shape));
  };
  EXPECT_NEAR(stddev("transformer.wte.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("transformer.h.0.mlp.c_fc.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("transformer.h.1.attn.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.001);
  EXPECT_NEAR(stddev("transformer.h.1.mlp.c_proj.weight"), 0.02 / std::sqrt(8.0), 0.001);
  EXPECT_EQ(stddev("transformer.h.0.attn.c_attn.bias"), 0.0);
  EXPECT_EQ(m.params().params()[m.params().find("transformer.ln_f.weight")->offset], 1.f);
  for (const ParamEntry& e : m.params().entries())
    EXPECT_EQ(e.decay, e.shape.size() >= 2) << e.name << ": nanoGPT decays exactly the 2-D tensors";
  EXPECT_EQ(m.params().entries().front().name, "transformer.wte.weight");
  EXPECT_EQ(m.params().entries().back().name, "transformer.ln_f.bias") << "nanoGPT's state_dict order";
}

TEST(Gpt, BadSpecsAndInputsAreClearErrors) {
  EXPECT_CONTAINS(error_of([] { Gpt m(gpt_spec(5, 4, 1, 3, 8)); }), "model.heads");
  EXPECT_CONTAINS(error_of([] { Gpt m(gpt_spec(0, 4, 1, 1, 8)); }), "needs a vocabulary");
  const ModelSpec fp16 = gpt_spec(5, 4, 1, 1, 8);
  EXPECT_CONTAINS(error_of([&] { Gpt m(fp16, ModelEnv{.precision = resolve_precision("fp16")}); }),
                  "runtime.precision fp16");
  Gpt m(gpt_spec(5, 4, 1, 1, 8));
  Arena arena;
  std::vector<int64_t> long_ids(6, 1), bad_ids{1, 2, 9};
  EXPECT_CONTAINS(error_of([&] { ModelPass(m, arena, false).forward(Tensor(long_ids.data(), {1, 6}, DType::i64)); }),
                  "block size 4");
  EXPECT_CONTAINS(error_of([&] { ModelPass(m, arena, false).forward(Tensor(bad_ids.data(), {1, 3}, DType::i64)); }),
                  "token id 9");
  // In a config the same mistake points at the key's line before any data is read.
  TempDir dir;
  const std::string cfg = write_file(dir, "gpt.yaml",
                                     "train:\n  loss: cross_entropy\ndata:\n  source: text\n  path: t.txt\nmodel:\n  type: gpt\n  hidden: 10\n  heads: 4\n");
  const std::string e = error_of([&] { load_config(cfg); });
  EXPECT_CONTAINS(e, "gpt.yaml:9:");
  EXPECT_CONTAINS(e, "model.heads");
  EXPECT_CONTAINS(e, "divisors of 10");
  EXPECT_EQ(&family("gpt"), find_family("gpt"));
  EXPECT_TRUE(family("gpt").generates_text);
}

}  // namespace
}  // namespace seqtrain::testing
