// Gradient checkpointing of the RNN layers: the same gradients as without it (to 1e-6
// relative) and less activation memory, with the gates recomputed block by block.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/rnn_fused.h"
#include "models/forecaster.h"
#include "model_pass.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

struct CkptCase { const char* type; int64_t layers; bool bidir; float dropout; const char* precision; };
class GradCheckpoint : public ::testing::TestWithParam<CkptCase> {};

struct StepOut { std::vector<float> y, grads; size_t arena_bytes = 0, extra_bytes = 0; };

StepOut one_step(const ModelSpec& spec, const ModelEnv& env, const std::vector<float>& init,
                 const std::vector<float>& x, const std::vector<float>& dy, int64_t N, int repeats = 2) {
  Forecaster m(spec, env);
  std::memcpy(m.params().params(), init.data(), init.size() * sizeof(float));
  Arena arena;
  StepOut out;
  for (int r = 0; r < repeats; ++r) {  // the second step runs on the sized arenas
    arena.reset();
    m.params().zero_grad();
    ModelPass pass(m, arena, true, /*seed=*/99);
    Tensor y = pass.forward(Tensor(const_cast<float*>(x.data()), {N, spec.lookback, spec.input_size}));
    pass.backward(Tensor(const_cast<float*>(dy.data()), {N, spec.output_size}));
    out.y.assign(y.f32(), y.f32() + y.numel());
    out.extra_bytes = pass.ctx.scratch_bytes;
  }
  out.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
  out.arena_bytes = arena.high_water();
  return out;
}

TEST_P(GradCheckpoint, SameGradientsLessMemory) {
  const CkptCase c = GetParam();
  if (std::string(c.precision) == "bf16" && !cpu_has_native_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  // T spans three blocks of the recompute (fused_rnn_backward_chunk: 32 steps at N = 64, the
  // last one short), so the backward recomputes block by block and the top layer's last block,
  // still in the buffer, is reused.
  const int64_t N = 64, T = 80, C = 5, H = 24, OUT = 3;
  ASSERT_EQ(fused_rnn_backward_chunk(N, T), 32);
  ModelSpec spec{c.type, C, T, H, c.layers, c.bidir, c.dropout, OUT};
  const ModelEnv env{.precision = resolve_precision(c.precision)};
  Forecaster init_model(spec, env);
  Rng rng(17);
  init_model.init(rng);
  std::vector<float> init(init_model.params().params(), init_model.params().params() + init_model.params().size());
  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();

  StepOut plain = one_step(spec, env, init, x, dy, N);
  spec.grad_checkpoint = true;
  StepOut ckpt = one_step(spec, env, init, x, dy, N);
  EXPECT_LT(rel_err(ckpt.y, plain.y), 1e-6);
  for (const auto& e : init_model.params().entries()) {
    std::vector<float> a(ckpt.grads.begin() + e.offset, ckpt.grads.begin() + e.offset + numel_of(e.shape));
    std::vector<float> b(plain.grads.begin() + e.offset, plain.grads.begin() + e.offset + numel_of(e.shape));
    EXPECT_LT(rel_err(a, b), 1e-6) << e.name;
  }
  EXPECT_EQ(plain.extra_bytes, 0u);
  EXPECT_GT(ckpt.extra_bytes, 0u);
  const double before = plain.arena_bytes, after = ckpt.arena_bytes + ckpt.extra_bytes;
  EXPECT_LT(after, before) << "activation bytes: " << before << " -> " << after;
  if (c.layers >= 2 && !c.bidir) {
    EXPECT_LT(after, 0.7 * before) << before << " -> " << after;
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, GradCheckpoint,
                         ::testing::Values(CkptCase{"lstm", 2, false, 0.f, "fp32"},
                                           CkptCase{"lstm", 3, true, 0.3f, "fp32"},
                                           CkptCase{"gru", 2, false, 0.f, "fp32"},
                                           CkptCase{"gru", 2, true, 0.2f, "fp32"},
                                           CkptCase{"lstm", 2, false, 0.f, "bf16"},
                                           CkptCase{"gru", 2, true, 0.f, "bf16"},
                                           CkptCase{"lstm", 2, true, 0.f, "fp16"}),
                         [](const auto& info) {
                           return std::string(info.param.type) + "_l" + std::to_string(info.param.layers) +
                                  (info.param.bidir ? "_bi" : "_uni") + (info.param.dropout > 0 ? "_drop_" : "_") +
                                  info.param.precision;
                         });

TEST(GradCheckpointEval, EvalForwardNeedsNoScratchAndMatches) {
  ModelSpec spec{"lstm", 3, 10, 8, 2, false, 0.f, 1};
  Forecaster a(spec);
  spec.grad_checkpoint = true;
  Forecaster b(spec);
  Rng rng(2);
  a.init(rng);
  std::memcpy(b.params().params(), a.params().params(), a.params().size() * sizeof(float));
  std::vector<float> x(4 * 10 * 3);
  for (auto& v : x) v = rng.normal();
  Arena ar1, ar2;
  Tensor ya = ModelPass(a, ar1, false).forward(Tensor(x.data(), {4, 10, 3}));
  ModelPass eval_b(b, ar2, false);
  Tensor yb = eval_b.forward(Tensor(x.data(), {4, 10, 3}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ya.f32()[i], yb.f32()[i]);
  EXPECT_EQ(eval_b.ctx.scratch_bytes, 0u);
}

}  // namespace
}  // namespace seqtrain::testing
