// RNN encoders honour lengths (RnnStack::forward's, a Batch's through the forecaster): each
// sample stops at its own length as PyTorch's pack_padded_sequence(enforce_sorted=False) runs it
// (tests/py/rnn_lengths_ref.py), on the fused CPU kernels and the reference backend: outputs
// (zeros past the length), final states, dx and every parameter gradient; finite differences
// of the double reference (rnn_reference.h); padded steps reach nothing; lengths all T are bit
// for bit no lengths; the checkpointed and 16-bit fused paths honour them; model.pooling last /
// mean / max against the PyTorch mirror; oneDNN refuses lengths, the autotuner leaves it out.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "backend/autotune.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"
#include "io/safetensors.h"
#include "models/forecaster.h"
#include "models/step_context.h"
#include "rnn_reference.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

constexpr int64_t N = 5, T = 7, C = 3, H = 6, OUT = 2;
const std::vector<int64_t> kLengths = {4, 1, 7, 6, 2};  // all different, 1 and T among them
const std::vector<int64_t> kFull(N, T);

struct Case {
  const char* cell;
  int64_t layers;
  bool bidir;
  const char* backend;
};

ModelSpec spec_of(const Case& c, const std::string& pooling = "last") {
  ModelSpec s{c.cell, C, T, H, c.layers, c.bidir, 0.f, OUT};
  s.backend = c.backend;
  s.pooling = pooling;
  return s;
}

std::vector<float> normals(Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal();
  return v;
}

bool padded(int64_t t, int64_t n) { return t >= kLengths[n]; }

// One training pass of a forecaster's RnnStack on time-major x [T, N, C] and dy [T, N, F]:
// its output [T, N, F], dx (time-major) and each parameter's gradient by name.
struct StackRun {
  std::vector<float> out, dx;
  std::map<std::string, std::vector<float>> grads;
  bool operator==(const StackRun&) const = default;
};

StackRun run_stack(Forecaster& m, std::vector<float> x, std::vector<float> dy, std::span<const int64_t> lengths) {
  Arena arena;
  m.params().zero_grad();
  RnnStack& rnn = m.rnn();
  Tensor out = rnn.forward_time_major(Tensor(x.data(), {T, N, C}), arena, true, 0, lengths);
  StackRun r;
  r.out.assign(out.f32(), out.f32() + out.numel());
  Tensor dx = rnn.backward(Tensor(dy.data(), {T, N, rnn.output_size()}), arena, true);  // [N, T, C]
  r.dx.resize(dx.numel());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      std::memcpy(&r.dx[(t * N + n) * C], dx.f32() + (n * T + t) * C, C * sizeof(float));
  for (size_t i = 0; i < m.params().entries().size(); ++i) {
    Tensor g = m.params().grad(i);
    r.grads[m.params().entries()[i].name].assign(g.f32(), g.f32() + g.numel());
  }
  return r;
}

class RnnLengths : public ::testing::TestWithParam<Case> {};

TEST_P(RnnLengths, MatchPyTorchPackedSequences) {
  SEQTRAIN_REQUIRE_TORCH();
  const Case c = GetParam();
  Forecaster m(spec_of(c));
  Rng rng(21);
  m.init(rng);
  const int64_t F = m.rnn().output_size(), D = c.bidir ? 2 : 1;
  const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * F);
  const StackRun r = run_stack(m, x, dy, kLengths);

  TempDir dir;
  save_params(dir / "model.safetensors", m.params());
  write_npy(dir / "x.npy", x, {T, N, C});
  write_npy(dir / "dy.npy", dy, {T, N, F});
  write_npy(dir / "lengths.npy", kLengths, {N});
  ASSERT_EQ(run_python("rnn_lengths_ref.py", dir.path.string() + " " + c.cell + " " + std::to_string(c.layers) +
                                                 (c.bidir ? " 1 " : " 0 ") + std::to_string(H)),
            0);
  EXPECT_LT(rel_err(r.out, read_npy(dir / "out_ref.npy")), 1e-5);
  EXPECT_LT(rel_err(r.dx, read_npy(dir / "dx_ref.npy")), 1e-5);
  // The top layer's final states: the forward direction's output at each sample's last valid
  // step, the reverse direction's at step 0.
  const auto hn = read_npy(dir / "hn_ref.npy");  // [layers * D, N, H]
  std::vector<float> ours;
  std::vector<double> ref;
  for (int64_t d = 0; d < D; ++d)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t t = d == 0 ? kLengths[n] - 1 : 0;
        ours.push_back(r.out[(t * N + n) * F + d * H + j]);
        ref.push_back(hn[(((c.layers - 1) * D + d) * N + n) * H + j]);
      }
  EXPECT_LT(rel_err(ours, ref), 1e-5);
  SafetensorsFile grads = read_safetensors(dir / "grads.safetensors");
  ASSERT_EQ(grads.tensors.size(), 4u * c.layers * D);
  for (const auto& t : grads.tensors) {
    std::vector<double> g(t.numel());
    std::memcpy(g.data(), t.bytes.data(), g.size() * sizeof(double));
    EXPECT_LT(rel_err(r.grads.at(t.name), g), 1e-5) << t.name;
  }
}

// d/dp sum(dy * out) by central differences of the double reference with the same lengths.
TEST_P(RnnLengths, GradientsMatchFiniteDifferences) {
  const Case c = GetParam();
  Forecaster m(spec_of(c));
  Rng rng(5);
  m.init(rng);
  const int64_t F = m.rnn().output_size(), D = c.bidir ? 2 : 1;
  const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * F);
  const StackRun r = run_stack(m, x, dy, kLengths);
  std::vector<double> xb(N * T * C);  // batch first, as ref_rnn takes it
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < C; ++k) xb[(n * T + t) * C + k] = x[(t * N + n) * C + k];
  const bool lstm = std::string(c.cell) == "lstm";
  auto objective = [&](const DParams& q, std::vector<double>* out = nullptr) {
    const auto y = ref_rnn(lstm, q, xb, N, T, C, H, c.layers, D, kLengths);  // [N, T, F]
    double s = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < F; ++j) {
          s += dy[(t * N + n) * F + j] * y[(n * T + t) * F + j];
          if (out) out->push_back(y[(n * T + t) * F + j]);
        }
    return s;
  };
  DParams p = to_double(m.params());
  std::vector<double> yref;
  objective(p, &yref);
  EXPECT_LT(rel_err(r.out, yref), 1e-5);
  const double eps = 1e-6;
  for (const auto& [name, g] : r.grads) {
    if (name.rfind("rnn.", 0) != 0) continue;
    std::vector<double> fd, an;
    const size_t stride = std::max<size_t>(1, g.size() / 23);
    for (size_t i = 0; i < g.size(); i += stride) {
      DParams q = p;
      q[name][i] += eps;
      const double up = objective(q);
      q[name][i] -= 2 * eps;
      fd.push_back((up - objective(q)) / (2 * eps));
      an.push_back(g[i]);
    }
    EXPECT_LT(rel_err(an, fd), 1e-3) << name;
  }
}

// Other x and dy at padded steps change no output and no gradient, bit for bit; the outputs and
// dx there are zero.
TEST_P(RnnLengths, PaddedStepsReachNothing) {
  const Case c = GetParam();
  Forecaster m(spec_of(c));
  Rng rng(9);
  m.init(rng);
  const int64_t F = m.rnn().output_size();
  const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * F);
  auto x2 = x, dy2 = dy;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      if (padded(t, n)) {
        for (int64_t k = 0; k < C; ++k) x2[(t * N + n) * C + k] = 5.f * rng.normal();
        for (int64_t j = 0; j < F; ++j) dy2[(t * N + n) * F + j] = 5.f * rng.normal();
      }
  const StackRun a = run_stack(m, x, dy, kLengths), b = run_stack(m, x2, dy2, kLengths);
  EXPECT_TRUE(a == b);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      if (padded(t, n)) {
        for (int64_t j = 0; j < F; ++j) ASSERT_EQ(a.out[(t * N + n) * F + j], 0.f) << t << " " << n;
        for (int64_t k = 0; k < C; ++k) ASSERT_EQ(a.dx[(t * N + n) * C + k], 0.f) << t << " " << n;
      }
}

TEST_P(RnnLengths, AllFullLengthIsBitIdenticalToNoLengths) {
  const Case c = GetParam();
  Forecaster m(spec_of(c));
  Rng rng(13);
  m.init(rng);
  const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * m.rnn().output_size());
  EXPECT_TRUE(run_stack(m, x, dy, kFull) == run_stack(m, x, dy, {}));
}

INSTANTIATE_TEST_SUITE_P(Stacks, RnnLengths,
                         ::testing::Values(Case{"lstm", 2, true, "cpu"}, Case{"gru", 2, true, "cpu"},
                                           Case{"lstm", 2, false, "cpu"}, Case{"gru", 1, false, "cpu"},
                                           Case{"lstm", 2, true, "reference"}, Case{"gru", 2, true, "reference"},
                                           Case{"gru", 2, false, "reference"}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return std::string(c.cell) + "_l" + std::to_string(c.layers) + (c.bidir ? "_bi_" : "_uni_") +
                                  c.backend;
                         });

// The fused kernels' other paths honour lengths too: gradient checkpointing (bit for bit the
// plain pass: the recompute runs the same calls) and 16-bit GEMM operands (within their
// rounding of fp32, with padded steps still reaching nothing).
TEST(RnnLengthsFused, GradientCheckpointingHonoursLengths) {
  for (const char* cell : {"lstm", "gru"}) {
    ModelSpec spec = spec_of(Case{cell, 2, true, "cpu"});
    Forecaster plain(spec);
    spec.grad_checkpoint = true;
    Forecaster ckpt(spec);
    Rng rng(3);
    plain.init(rng);
    std::memcpy(ckpt.params().params(), plain.params().params(), plain.params().size() * sizeof(float));
    const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * 2 * H);
    EXPECT_TRUE(run_stack(ckpt, x, dy, kLengths) == run_stack(plain, x, dy, kLengths)) << cell;
  }
}

// bf16 needs the CPU's (or the ISA cap's) AVX512-BF16 for oneDNN's matmul; fp16 is emulated
// on every level.
TEST(RnnLengthsFused, HalfPrecisionHonoursLengths) {
  for (const DType half : {DType::bf16, DType::f16})
    for (const char* cell : {"lstm", "gru"}) {
      if (half == DType::bf16 && !cpu_has_native_bf16()) continue;
      const ModelSpec spec = spec_of(Case{cell, 2, true, "cpu"});
      Forecaster fp32(spec);
      Forecaster mixed(spec, ModelEnv{nullptr, Precision{half, false}});
      Rng rng(4);
      fp32.init(rng);
      std::memcpy(mixed.params().params(), fp32.params().params(), fp32.params().size() * sizeof(float));
      const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * 2 * H);
      auto x2 = x;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n)
          if (padded(t, n))
            for (int64_t k = 0; k < C; ++k) x2[(t * N + n) * C + k] = 3.f;
      const StackRun ref = run_stack(fp32, x, dy, kLengths), a = run_stack(mixed, x, dy, kLengths);
      EXPECT_TRUE(a == run_stack(mixed, x2, dy, kLengths)) << cell;
      EXPECT_LT(rel_err(a.out, ref.out), 2e-2) << cell;
      EXPECT_LT(rel_err(a.dx, ref.dx), 3e-2) << cell;
      for (const auto& [name, g] : ref.grads) EXPECT_LT(rel_err(a.grads.at(name), g), 3e-2) << cell << " " << name;
    }
}

// model.pooling over each sample's valid steps, through the forecaster and its Batch's lengths,
// against the PyTorch mirror (seqtrain_torch.Forecaster(pooling=...)(x, lengths)).
struct PoolCase {
  const char* cell;
  bool bidir;
  const char* pooling;
  bool lengths;
  const char* backend = "cpu";
};
class RnnPoolingParity : public ::testing::TestWithParam<PoolCase> {};

TEST_P(RnnPoolingParity, MatchesTheMirror) {
  SEQTRAIN_REQUIRE_TORCH();
  const PoolCase c = GetParam();
  const int64_t layers = 2;
  Forecaster m(spec_of(Case{c.cell, layers, c.bidir, c.backend}, c.pooling));
  Rng rng(17);
  m.init(rng);
  std::vector<float> x = normals(rng, N * T * C), dy = normals(rng, N * OUT);
  std::vector<int64_t> lengths = kLengths;
  Arena arena;
  Batch batch = batch_of(Tensor(x.data(), {N, T, C}));
  if (c.lengths) batch.lengths = Tensor(lengths.data(), {N}, DType::i64);
  StepContext ctx(arena, true);
  Tensor y = m.forward(batch, ctx);
  std::vector<float> yv(y.f32(), y.f32() + y.numel());
  m.params().zero_grad();
  ctx.output_grad = Tensor(dy.data(), {N, OUT});
  m.backward(ctx);

  TempDir dir;
  save_params(dir / "model.safetensors", m.params());
  write_npy(dir / "x.npy", x, {N, T, C});
  write_npy(dir / "dy.npy", dy, {N, OUT});
  if (c.lengths) write_npy(dir / "lengths.npy", lengths, {N});
  ASSERT_EQ(run_python("forecaster_ref.py", dir.path.string() + " " + c.cell + " " + std::to_string(layers) +
                                                (c.bidir ? " 1 " : " 0 ") + std::to_string(OUT) + " " +
                                                std::to_string(H) + " " + c.pooling),
            0);
  EXPECT_LT(rel_err(yv, read_npy(dir / "y.npy")), 1e-5);
  SafetensorsFile grads = read_safetensors(dir / "grads.safetensors");
  ASSERT_EQ(grads.tensors.size(), m.params().entries().size());
  for (size_t i = 0; i < m.params().entries().size(); ++i) {
    const auto& e = m.params().entries()[i];
    const NamedTensor& ref = grads.at(e.name);
    std::vector<double> r(ref.numel());
    std::memcpy(r.data(), ref.bytes.data(), r.size() * sizeof(double));
    Tensor g = m.params().grad(i);
    EXPECT_LT(rel_err(std::vector<float>(g.f32(), g.f32() + g.numel()), r), 1e-5) << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Poolings, RnnPoolingParity,
    ::testing::Values(PoolCase{"lstm", true, "last", true}, PoolCase{"lstm", true, "mean", true},
                      PoolCase{"lstm", true, "max", true}, PoolCase{"gru", false, "last", true},
                      PoolCase{"gru", false, "mean", true}, PoolCase{"gru", false, "max", true},
                      PoolCase{"gru", true, "mean", false}, PoolCase{"lstm", false, "max", false},
                      PoolCase{"lstm", true, "max", true, "reference"}),
    [](const auto& info) {
      const PoolCase& c = info.param;
      return std::string(c.cell) + (c.bidir ? "_bi_" : "_uni_") + c.pooling + (c.lengths ? "_lengths_" : "_full_") +
             c.backend;
    });

// oneDNN's primitive runs every sample to T: asked for by the config, it refuses lengths and
// names the fix; the autotuner times no oneDNN candidate for a run with lengths, and a layer
// whose cached choice is oneDNN runs the fused kernels once lengths come.
TEST(RnnLengthsOnednn, ExplicitOnednnRefusesLengths) {
  ModelSpec spec = spec_of(Case{"lstm", 1, false, "cpu"});
  spec.rnn_impl = "onednn";
  Forecaster m(spec);
  Rng rng(1);
  m.init(rng);
  auto x = normals(rng, T * N * C);
  Arena arena;
  const std::string err = error_of([&] { m.rnn().forward_time_major(Tensor(x.data(), {T, N, C}), arena, true, 0, kLengths); });
  EXPECT_CONTAINS(err, "runtime.rnn_impl onednn");
  EXPECT_CONTAINS(err, "Use runtime.rnn_impl fused");
}

TEST(RnnLengthsOnednn, TheAutotunerLeavesOnednnOutOfARunWithLengths) {
  ModelSpec spec = spec_of(Case{"gru", 1, true, "cpu"});
  Forecaster plain(spec);
  spec.autotune = true;
  auto tuner = std::make_shared<Autotuner>();
  tuner->set_timer([](const std::string&, const TuneCandidate& c) { return c.name == "onednn" ? 1.0 : 2.0; });
  Forecaster tuned(spec, ModelEnv{tuner});
  Rng rng(2);
  plain.init(rng);
  std::memcpy(tuned.params().params(), plain.params().params(), plain.params().size() * sizeof(float));
  const auto x = normals(rng, T * N * C), dy = normals(rng, T * N * 2 * H);
  const StackRun a = run_stack(tuned, x, dy, kLengths);
  ASSERT_EQ(tuner->decisions().size(), 1u);
  for (const auto& [name, ms] : tuner->decisions()[0].timings_ms) EXPECT_NE(name, "onednn");
  EXPECT_EQ(tuner->decisions()[0].timings_ms.size(), active_isa() > Isa::avx2 ? 2u : 0u);
  EXPECT_EQ(tuned.rnn().layer_impl(0), "fused");
  EXPECT_LT(rel_err(a.out, run_stack(plain, x, dy, kLengths).out), 1e-6);

  // A choice of oneDNN made without lengths (or cached by such a run) gives way to the fused
  // kernels at the first batch with lengths.
  auto tuner2 = std::make_shared<Autotuner>();
  tuner2->set_timer([](const std::string&, const TuneCandidate& c) { return c.name == "onednn" ? 1.0 : 2.0; });
  Forecaster cached(spec, ModelEnv{tuner2});
  std::memcpy(cached.params().params(), plain.params().params(), plain.params().size() * sizeof(float));
  run_stack(cached, x, dy, {});
  EXPECT_EQ(cached.rnn().layer_impl(0), "onednn");
  const StackRun b = run_stack(cached, x, dy, kLengths);
  EXPECT_EQ(cached.rnn().layer_impl(0), "fused");
  EXPECT_TRUE(b == run_stack(plain, x, dy, kLengths));
}

TEST(RnnLengthsStack, RefusesLengthsOutOfRange) {
  Forecaster m(spec_of(Case{"lstm", 1, false, "cpu"}));
  std::vector<float> x(T * N * C, 0.f);
  Arena arena;
  auto run = [&](std::vector<int64_t> l) {
    return error_of([&] { m.rnn().forward_time_major(Tensor(x.data(), {T, N, C}), arena, false, 0, l); });
  };
  EXPECT_CONTAINS(run({1, 2, 3}), "one length per sample (5)");
  EXPECT_CONTAINS(run({1, 2, 0, 4, 5}), "sample 2 is 0: it must be in [1, 7]");
  EXPECT_CONTAINS(run({1, 2, 8, 4, 5}), "sample 2 is 8");
}

}  // namespace
}  // namespace seqtrain::testing
