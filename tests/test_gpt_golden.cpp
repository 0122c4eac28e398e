// The GPT trains bit for bit as the recorded run: 20 AdamW steps (dropout on, grad clipping,
// warmup + cosine) from a fixed init, each step's loss and every final weight compared exactly
// with tests/data/gpt_golden/, which the GPT wrote before its blocks moved onto the shared
// transformer layers (nn/transformer_block.h). It pins the arithmetic and the dropout seed use of
// the GPT path: fp32, fp32 with per-block gradient checkpointing, and bf16.
// The bits depend on the kernels the CPU's instruction set selects, so the files are named by it
// (backend/cpu/isa.h; bf16 also by whether oneDNN runs it on AMX) and a machine of another level
// skips. SEQTRAIN_WRITE_GOLDEN=1 rewrites them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "backend/precision.h"
#include "models/gpt.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_util.h"
#include "train/step.h"

namespace seqtrain::testing {
namespace {

struct GoldenCase { const char* name; bool checkpoint; const char* precision; };
class GptGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GptGolden, TwentyStepsAreBitIdenticalToTheRecordedRun) {
  const GoldenCase c = GetParam();
  if (std::string(c.precision) == "bf16" && !cpu_has_native_bf16()) GTEST_SKIP() << "no AVX512-BF16";
  const int64_t V = 13, block = 8, B = 4, T = 8, N = 20;
  ModelSpec spec;
  spec.type = "gpt";
  spec.vocab_size = V;
  spec.lookback = block;
  spec.layers = 2;
  spec.heads = 2;
  spec.hidden = 16;
  spec.dropout = 0.1f;
  spec.decay = "2d";
  spec.grad_checkpoint = c.checkpoint;
  spec.output_size = block;
  Gpt m(spec, ModelEnv{.precision = resolve_precision(c.precision)});
  Rng rng(29);
  m.init(rng);
  std::vector<int64_t> bx(N * B * T), by(N * B * T);
  for (size_t i = 0; i < bx.size(); ++i) {
    bx[i] = static_cast<int64_t>(rng.below(V));
    by[i] = (bx[i] * 5 + 2) % V;
  }
  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3, .beta2 = 0.99, .weight_decay = 0.1});
  opt->set_decay_mask(m.params().decay_mask());
  auto sched = make_schedule(
      ScheduleOptions{.name = "cosine", .base_lr = 3e-3, .warmup_steps = 5, .total_steps = N, .min_lr = 3e-4});
  TrainStep step(m, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
  std::vector<double> losses;
  for (int64_t s = 0; s < N; ++s) {
    step.run(Tensor(bx.data() + s * B * T, {B, T}, DType::i64), Tensor(by.data() + s * B * T, {B, T}, DType::i64),
             1000 + s);
    losses.push_back(step.take_loss());
  }
  const std::vector<float> weights(m.params().params(), m.params().params() + m.params().size());

  // bf16's products run on AMX tiles where oneDNN finds them (Sapphire Rapids and later), which
  // sum in another order than its AVX512-BF16 kernels: such runs are recorded apart.
  std::string kernels = isa_name(active_isa());
  if (std::string(c.precision) == "bf16" && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx)
    kernels += "_amx";
  const std::string base = source_dir() + "/tests/data/gpt_golden/" + c.name + "_" + kernels;
  if (std::getenv("SEQTRAIN_WRITE_GOLDEN")) {
    write_npy(base + "_losses.npy", losses, {N});
    write_npy(base + "_weights.npy", weights, {static_cast<int64_t>(weights.size())});
  }
  if (!std::filesystem::exists(base + "_losses.npy")) GTEST_SKIP() << "no recorded run for this ISA: " << base;
  const std::vector<double> want_losses = read_npy(base + "_losses.npy");
  const std::vector<double> want_weights = read_npy(base + "_weights.npy");
  ASSERT_EQ(want_losses.size(), losses.size());
  for (int64_t s = 0; s < N; ++s) EXPECT_EQ(losses[s], want_losses[s]) << "step " << s;
  ASSERT_EQ(want_weights.size(), weights.size());
  size_t differ = 0;
  for (size_t i = 0; i < weights.size(); ++i) differ += static_cast<double>(weights[i]) != want_weights[i];
  EXPECT_EQ(differ, 0u) << "of " << weights.size() << " weights";
  EXPECT_LT(losses.back(), losses.front()) << "the run learns";
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptGolden,
                         ::testing::Values(GoldenCase{"fp32", false, "fp32"}, GoldenCase{"fp32_ckpt", true, "fp32"},
                                           GoldenCase{"bf16", false, "bf16"}),
                         [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace seqtrain::testing
