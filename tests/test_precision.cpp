// The precision policy (backend/precision.h) and the layers that follow it beyond the RNN:
// runtime.precision resolved once into a Precision; the Backend's convert op (CPU kernels bit for
// bit the reference's scalar definition); Linear in bf16 against its oracle and against fp32
// within a stated bound; the GPT in bf16 training within 2% of fp32's loss; a training run and
// load_model handing the one policy to the model; old state.json model_specs with "precision".
// Tests that need native bf16 skip with the reason on CPUs without AVX512-BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "backend/backend.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/precision.h"
#include "models/gpt.h"
#include "models/registry.h"
#include "nn/linear.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_util.h"
#include "train/load_model.h"
#include "train/observer.h"
#include "train/step.h"
#include "train/trainer.h"

namespace seqtrain::testing {
namespace {

#define SEQTRAIN_REQUIRE_BF16()                                                                            \
  do {                                                                                                     \
    if (!::seqtrain::cpu_has_native_bf16()) GTEST_SKIP() << "CPU has no AVX512-BF16: bf16 is not run here"; \
  } while (0)

Backend& cpu() { return backend_named("cpu"); }
Backend& ref() { return backend_named("reference"); }

TEST(Precision, RuntimePrecisionResolvesIntoOnePolicy) {
  std::string why;
  EXPECT_EQ(resolve_precision("fp32", &why), Precision{});
  EXPECT_FALSE(resolve_precision("fp32").loss_scaling);
  const Precision fp16 = resolve_precision("fp16", &why);
  EXPECT_EQ(fp16.compute, DType::f16);
  EXPECT_TRUE(fp16.loss_scaling) << "fp16 gradients need the GradScaler";
  EXPECT_STREQ(precision_name(fp16), "fp16");
  const Precision a = resolve_precision("auto", &why);
  EXPECT_EQ(a.compute, cpu_has_native_bf16() ? DType::bf16 : DType::f32);
  EXPECT_FALSE(a.loss_scaling) << "bf16 has fp32's range";
  EXPECT_CONTAINS(why, "auto");
  const std::string e = error_of([] { resolve_precision("bf32"); });
  EXPECT_CONTAINS(e, "runtime.precision 'bf32' is not known");
  EXPECT_CONTAINS(e, "fp32, bf16, fp16 or auto");
  if (!cpu_has_native_bf16()) {
    EXPECT_CONTAINS(error_of([] { resolve_precision("bf16"); }), "AVX512-BF16");
  }
}

// Values that exercise every rounding case: ties both ways, NaN, infinities, subnormals of both
// formats, fp16's overflow, and long enough runs for the vector loops and the threaded split.
std::vector<float> awkward_values(int64_t n) {
  Rng rng(3);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal() * std::exp2(static_cast<float>(rng.below(40)) - 20.f);
  const float specials[] = {1.f + 1.f / 256, 1.f + 3.f / 256, -0.f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            65520.f, 65519.f, 1e-7f, 3e-8f, 1e-40f, 70000.f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]) && i < v.size(); ++i) v[i * 7 % v.size()] = specials[i];
  return v;
}

bool f32_subnormal(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x7f800000u) == 0 && (u & 0x7fffffu) != 0;
}

TEST(Precision, ConvertOnTheCpuIsTheReferenceBitForBit) {
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{70000}}) {
      const std::vector<float> v = awkward_values(n);
      std::vector<uint16_t> a(n), b(n);
      cpu().convert(DType::f32, v.data(), t, a.data(), n);
      ref().convert(DType::f32, v.data(), t, b.data(), n);
      // The CPU kernel at avx512_bf16 reads f32 subnormals as zero (cpu_kernels.h); compare the
      // rest bit for bit. (Subnormals are told by their bits: with the compute threads'
      // denormals-are-zero on, fpclassify may call them zero.)
      for (int64_t i = 0; i < n; ++i)
        if (!f32_subnormal(v[i])) {
          ASSERT_EQ(a[i], b[i]) << dtype_name(t) << " value " << v[i];
        }
      std::vector<float> wa(n), wb(n);
      cpu().convert(t, b.data(), DType::f32, wa.data(), n);
      ref().convert(t, b.data(), DType::f32, wb.data(), n);
      EXPECT_EQ(0, std::memcmp(wa.data(), wb.data(), n * sizeof(float))) << dtype_name(t) << " widening, n " << n;
    }
  float x = 1.f;
  double d = 0;
  EXPECT_CONTAINS(error_of([&] { cpu().convert(DType::f32, &x, DType::f64, &d, 1); }), "no conversion from f32 to f64");
  EXPECT_CONTAINS(error_of([&] { ref().convert(DType::f64, &d, DType::f32, &x, 1); }), "no conversion from f64 to f32");
}

// ---- Linear in bf16 -------------------------------------------------------------------------

struct LinearRun {
  std::vector<float> y, dx, dw, db;
};

// One forward and backward of Linear(in, out) on `backend` in `compute`, from the given weights.
LinearRun run_linear(Backend& backend, DType compute, const std::vector<float>& w, const std::vector<float>& b,
                     const std::vector<float>& x, const std::vector<float>& dy, int64_t N, int64_t in, int64_t out) {
  ParamStore ps;
  ps.set_backend(backend);
  Linear lin(ps, "proj", in, out, true, compute);
  ps.finalize();
  std::copy(w.begin(), w.end(), ps.param(lin.weight).f32());
  std::copy(b.begin(), b.end(), ps.param(lin.bias).f32());
  Arena arena;
  Tensor y = lin.forward(Tensor(const_cast<float*>(x.data()), {N, in}), arena);
  Tensor dx = lin.backward(Tensor(const_cast<float*>(dy.data()), {N, out}), arena);
  LinearRun r;
  r.y.assign(y.f32(), y.f32() + y.numel());
  r.dx.assign(dx.f32(), dx.f32() + dx.numel());
  r.dw.assign(ps.grad(lin.weight).f32(), ps.grad(lin.weight).f32() + out * in);
  r.db.assign(ps.grad(lin.bias).f32(), ps.grad(lin.bias).f32() + out);
  return r;
}

// v rounded to bf16 through the reference backend and widened back.
std::vector<float> bf16_rounded(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::vector<float> out(v.size());
  ref().convert(DType::f32, v.data(), DType::bf16, h.data(), v.size());
  ref().convert(DType::bf16, h.data(), DType::f32, out.data(), v.size());
  return out;
}

struct LinearCase {
  int64_t N = 96, in = 80, out = 48;
  std::vector<float> w, b, x, dy;
  LinearCase() {
    Rng rng(8);
    w = randn(rng, out * in, 0.2f);
    b = randn(rng, out);
    x = randn(rng, N * in);
    dy = randn(rng, N * out);
  }
};

// The oracle: bf16 x bf16 products are exact in fp32 (8 + 8 significant bits), so the CPU's bf16
// Linear must equal the reference's fp32 Linear (fp64 accumulation) on the operands rounded to
// bf16 — x, W and dy — up to its own fp32 accumulation: 1e-5 of the scale, as tests/test_backend.cpp
// holds every CPU op to the reference. The bias gradient sums the unrounded dy in both.
TEST(LinearBf16, EqualsTheReferenceOnBf16RoundedOperands) {
  SEQTRAIN_REQUIRE_BF16();
  const LinearCase c;
  const LinearRun got = run_linear(cpu(), DType::bf16, c.w, c.b, c.x, c.dy, c.N, c.in, c.out);
  const LinearRun want = run_linear(ref(), DType::f32, bf16_rounded(c.w), c.b, bf16_rounded(c.x), bf16_rounded(c.dy),
                                    c.N, c.in, c.out);
  const LinearRun db = run_linear(ref(), DType::f32, c.w, c.b, c.x, c.dy, c.N, c.in, c.out);
  EXPECT_LT(rel_err(got.y, want.y), 1e-5);
  EXPECT_LT(rel_err(got.dx, want.dx), 1e-5);
  EXPECT_LT(rel_err(got.dw, want.dw), 1e-5);
  EXPECT_LT(rel_err(got.db, db.db), 1e-5);
  // The reference refuses a bf16 Linear by name rather than running it in fp32.
  ParamStore ps;
  ps.set_backend(ref());
  EXPECT_CONTAINS(error_of([&] { Linear(ps, "proj", 4, 4, true, DType::bf16); }),
                  "reference backend has no bf16 GEMM (Linear 'proj')");
  EXPECT_CONTAINS(error_of([&] { Linear(ps, "proj", 4, 4, true, DType::i64); }), "use f32, bf16 or f16");
}

// Against fp32 from the same weights: rounding an operand to bf16 changes it by a relative 2^-9
// at most (u, half of bf16's 2^-8 spacing), so each product a·b is off by at most (2u + u^2)|a·b|
// and a sum of K of them by (2u + u^2)·Σ|a·b|; both fp32 accumulations add at most K·2^-24·Σ|a·b|
// each. Every element of y (minus its bias), dx and dW must stay within that bound, computed from
// the fp32 operands, and bf16 must actually have run (some element off by more than fp32 could be).
TEST(LinearBf16, EveryElementWithinTheBf16RoundingBoundOfFp32) {
  SEQTRAIN_REQUIRE_BF16();
  const LinearCase c;
  const LinearRun bf = run_linear(cpu(), DType::bf16, c.w, c.b, c.x, c.dy, c.N, c.in, c.out);
  const LinearRun f32 = run_linear(cpu(), DType::f32, c.w, c.b, c.x, c.dy, c.N, c.in, c.out);
  const double u = std::exp2(-9.0), fp32 = std::exp2(-24.0);
  // Checks |got - want| <= bound(K) * abs_sum for one element; returns |got - want| / abs_sum.
  double worst = 0, largest = 0;
  auto check = [&](const char* what, double got, double want, double abs_sum, int64_t K) {
    const double bound = (2 * u + u * u + 2.0 * static_cast<double>(K) * fp32) * abs_sum;
    EXPECT_LE(std::abs(got - want), bound) << what;
    worst = std::max(worst, std::abs(got - want) / std::max(abs_sum, 1e-30));
    largest = std::max(largest, std::abs(got - want));
  };
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t j = 0; j < c.out; ++j) {
      double s = 0;
      for (int64_t k = 0; k < c.in; ++k) s += std::abs(c.x[n * c.in + k] * c.w[j * c.in + k]);
      check("y", bf.y[n * c.out + j], f32.y[n * c.out + j], s, c.in);
    }
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.in; ++k) {
      double s = 0;
      for (int64_t j = 0; j < c.out; ++j) s += std::abs(c.dy[n * c.out + j] * c.w[j * c.in + k]);
      check("dx", bf.dx[n * c.in + k], f32.dx[n * c.in + k], s, c.out);
    }
  for (int64_t j = 0; j < c.out; ++j)
    for (int64_t k = 0; k < c.in; ++k) {
      double s = 0;
      for (int64_t n = 0; n < c.N; ++n) s += std::abs(c.dy[n * c.out + j] * c.x[n * c.in + k]);
      check("dW", bf.dw[j * c.in + k], f32.dw[j * c.in + k], s, c.N);
    }
  EXPECT_EQ(bf.db, f32.db) << "the bias gradient sums fp32 dy in both";
  std::printf("[ bf16 ] Linear: worst |bf16 - fp32| / sum|a b| = %.2e (bound 2u = %.2e)\n", worst, 2 * u);
  EXPECT_GT(largest, 1e-4) << "bf16 operands should move some element by more than fp32 rounding";
}

// ---- the GPT in bf16 --------------------------------------------------------------------------

ModelSpec small_gpt() {
  ModelSpec s;
  s.type = "gpt";
  s.vocab_size = 24;
  s.lookback = 32;
  s.output_size = 32;
  s.layers = 2;
  s.heads = 2;
  s.hidden = 64;
  s.decay = "2d";
  return s;
}

// A learnable token stream: mostly next = (3 * prev + 1) mod V, sometimes a random token.
std::vector<int64_t> token_stream(int64_t n, int64_t V) {
  Rng rng(5);
  std::vector<int64_t> s(n);
  s[0] = 1;
  for (int64_t i = 1; i < n; ++i) s[i] = rng.below(8) == 0 ? static_cast<int64_t>(rng.below(V)) : (3 * s[i - 1] + 1) % V;
  return s;
}

// `steps` AdamW steps of small_gpt() in `precision` from Rng(7)'s init on fixed batches; the mean
// loss of the last `tail` steps, every loss into *losses.
double train_gpt(const std::string& precision, int steps, int tail, std::vector<double>* losses) {
  const ModelSpec spec = small_gpt();
  Gpt model(spec, ModelEnv{.precision = resolve_precision(precision)});
  Rng init(7);
  model.init(init);
  auto opt = make_optimizer(OptimizerOptions{.name = "adamw", .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.99,
                                             .weight_decay = 0.1});
  opt->set_decay_mask(model.params().decay_mask());
  auto sched = make_schedule(ScheduleOptions{.name = "constant", .base_lr = 3e-3});
  TrainStep step(model, *opt, *sched, StepOptions{LossKind::cross_entropy, {}, 1.0, 1});
  const int64_t B = 8, T = spec.lookback, V = spec.vocab_size;
  const std::vector<int64_t> text = token_stream(20000, V);
  Rng pick(9);
  std::vector<int64_t> x(B * T), y(B * T);
  double sum = 0;
  for (int i = 0; i < steps; ++i) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t at = static_cast<int64_t>(pick.below(static_cast<uint64_t>(text.size() - T - 1)));
      std::copy(text.begin() + at, text.begin() + at + T, x.begin() + b * T);
      std::copy(text.begin() + at + 1, text.begin() + at + 1 + T, y.begin() + b * T);
    }
    step.run(Tensor(x.data(), {B, T}, DType::i64), Tensor(y.data(), {B, T}, DType::i64), static_cast<uint64_t>(i));
    const double l = step.take_loss();
    losses->push_back(l);
    if (i >= steps - tail) sum += l / tail;
  }
  return sum;
}

TEST(GptBf16, TrainingEndsWithinTwoPercentOfFp32) {
  SEQTRAIN_REQUIRE_BF16();
  std::vector<double> l32, lbf;
  const double f32 = train_gpt("fp32", 150, 30, &l32);
  const double bf = train_gpt("bf16", 150, 30, &lbf);
  std::printf("[ bf16 ] GPT: mean loss of the last 30 of 150 steps: fp32 %.5f, bf16 %.5f (first step %.5f)\n", f32,
              bf, l32.front());
  EXPECT_LT(f32, 0.6 * l32.front()) << "the fp32 run should learn";
  EXPECT_LT(std::abs(bf - f32) / f32, 0.02) << "fp32 " << f32 << " bf16 " << bf;
}

// The policy reaches every product of the GPT: with bf16 its logits differ from fp32's by bf16
// rounding (not zero, which would mean fp32 ran), and within 2e-2 of their scale.
TEST(GptBf16, EveryProductFollowsThePolicy) {
  SEQTRAIN_REQUIRE_BF16();
  const ModelSpec spec = small_gpt();
  Gpt f32(spec), bf(spec, ModelEnv{.precision = resolve_precision("bf16")});
  EXPECT_EQ(bf.precision().compute, DType::bf16);
  Rng rng(7);
  f32.init(rng);
  std::memcpy(bf.params().params(), f32.params().params(), f32.params().size() * sizeof(float));
  const std::vector<int64_t> ids = token_stream(2 * spec.lookback, spec.vocab_size);
  Arena a1, a2;
  StepContext c1(a1), c2(a2);
  Batch batch;
  batch.inputs = Tensor(const_cast<int64_t*>(ids.data()), {2, spec.lookback}, DType::i64);
  Tensor y32 = f32.forward(batch, c1), ybf = bf.forward(batch, c2);
  const std::vector<float> v32(y32.f32(), y32.f32() + y32.numel()), vbf(ybf.f32(), ybf.f32() + ybf.numel());
  const double e = rel_err(vbf, v32);
  std::printf("[ bf16 ] GPT logits: bf16 vs fp32 relative error %.2e\n", e);
  EXPECT_GT(e, 1e-5);
  EXPECT_LT(e, 2e-2);
}

// ---- the policy through a run and back through load_model ----------------------------------

struct Notes : TrainObserver {
  std::vector<std::string> lines;
  void on_note(const std::string& t) override { lines.push_back(t); }
  bool any(const std::string& what) const {
    for (const auto& l : lines)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
};

Config tiny_gpt_run(const std::string& text, const std::string& precision) {
  return load_config("", {"data.source=text", "data.path=" + text, "data.block_size=16", "data.stride=16",
                          "data.split=[0.8,0.2,0]", "train.loss=cross_entropy", "model.type=gpt", "model.layers=1",
                          "model.heads=2", "model.hidden=16", "train.batch_size=4", "train.epochs=1",
                          "train.max_steps=3", "runtime.threads=1", "runtime.precision=" + precision});
}

TEST(PrecisionPolicy, TheRunLendsItToTheModelAndLoadModelRunsTheCheckpointInIt) {
  SEQTRAIN_REQUIRE_BF16();
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be\n";
  const std::string path = write_file(dir, "t.txt", text), run = dir / "run";
  Notes notes;
  TrainOptions o(run, false, false, true);
  o.observers.push_back(&notes);
  train(tiny_gpt_run(path, "bf16"), o);
  EXPECT_TRUE(notes.any("precision bf16")) << "the resolved policy is logged";
  EXPECT_TRUE(notes.any("every matrix product")) << "with what it covers (the registry's precision_covers)";
  std::ifstream f(run + "/checkpoints/last/state.json");
  const nlohmann::json st = nlohmann::json::parse(f);
  EXPECT_FALSE(st.at("model_spec").contains("precision")) << "the precision is the run's, not the model's";
  const LoadedModel m = load_model(run + "/checkpoints/last");
  EXPECT_EQ(m.model->precision().compute, DType::bf16) << "eval/generate run it as it trained";
  EXPECT_CONTAINS(error_of([&] { train(tiny_gpt_run(path, "fp16"), TrainOptions(dir / "run16", false, false, true)); }),
                  "runtime.precision fp16");
}

// A checkpoint of an older version: its state.json's model_spec carries "precision" (the run's
// runtime.precision, copied there). --resume accepts it, and load_model runs the model in it.
TEST(PrecisionPolicy, ACheckpointWithPrecisionInItsModelSpecResumesAndLoads) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "to be or not to be\n";
  const std::string path = write_file(dir, "t.txt", text), run = dir / "run";
  train(tiny_gpt_run(path, "fp32"), TrainOptions(run, false, false, true));
  const std::string state_path = run + "/checkpoints/last/state.json";
  nlohmann::json st = nlohmann::json::parse(std::ifstream(state_path));
  st["model_spec"]["precision"] = "auto";  // as versions before the policy wrote it
  st.erase("state_checksum");              // and before the state was sealed
  std::ofstream(state_path) << st.dump(2);
  EXPECT_EQ(load_model(run + "/checkpoints/last").model->precision(), resolve_precision("auto"))
      << "the old field is what the run trained with";
  Config more = tiny_gpt_run(path, "fp32");
  more.train.max_steps = 5;
  EXPECT_NO_THROW(train(more, TrainOptions(run, true, false, true)));
}

// state.json's model_spec written before the precision became the run's policy holds a
// "precision" field: it still loads (and names no field of today's spec).
TEST(PrecisionPolicy, OldModelSpecWithPrecisionStillLoads) {
  ModelSpec s = small_gpt();
  nlohmann::json j = spec_to_json(s);
  EXPECT_FALSE(j.contains("precision"));
  j["precision"] = "bf16";
  EXPECT_TRUE(spec_from_json(j) == s);
}

}  // namespace
}  // namespace seqtrain::testing

namespace seqtrain {
namespace {

// A GPU run's precision is judged by the GPU (the plugin's sm_80+ tensor cores), never by this
// CPU's bf16 support: auto is bf16 there, and the CPU backends keep the CPU rules.
TEST(PrecisionPolicy, AGpuRunIsJudgedByTheGpuNotTheCpu) {
  std::string why;
  EXPECT_EQ(resolve_precision("auto", "cuda:0", &why), (Precision{.compute = DType::bf16}));
  EXPECT_NE(why.find("cuda:0"), std::string::npos) << why;
  EXPECT_EQ(resolve_precision("bf16", "cuda:1", nullptr), (Precision{.compute = DType::bf16}));
  EXPECT_EQ(resolve_precision("fp16", "cuda:0", nullptr), (Precision{.compute = DType::f16, .loss_scaling = true}));
  EXPECT_EQ(resolve_precision("fp32", "cuda:0", nullptr), Precision{});
  EXPECT_EQ(resolve_precision("auto", "cpu", nullptr), resolve_precision("auto", nullptr));
  EXPECT_THROW(resolve_precision("fp8", "cuda:0", nullptr), Error);
}

}  // namespace
}  // namespace seqtrain
