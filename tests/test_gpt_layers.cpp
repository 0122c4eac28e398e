// Tests for the GPT layers: LayerNorm, the causal self-attention op (the CPU backend's flash
// kernels against the reference backend's naive loops) and the SelfAttention layer.
//
// Gradient checks follow tests/test_layers.cpp: the f32 analytic backward against central
// finite differences of L = sum(r * y) on a naive double-precision forward written here, for the
// input and every parameter. Parity checks run the same inputs through torch (float64,
// tests/py/gpt_layers_ref.py), attention dropout applied as the factors seqtrain drew.
//
// Tolerances. fp32 flash vs the fp64 reference: both store fp32 and differ in summation order
// and accumulation precision; a length-D or length-T fp32 dot product is within ~sqrt(K) 2^-24 of
// exact, and the online softmax's rescalings add a few ulps: 1e-5 of each tensor's scale.
// bf16: see Bf16WithinToleranceOfFp32.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/attention_dropout.h"
#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "models/model.h"
#include "nn/self_attention.h"
#include "nn/layer_norm.h"
#include "nn/params.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::error_of;
using testing::numgrad;
using testing::randn;
using testing::read_npy;
using testing::rel_err;
using testing::run_python;
using testing::TempDir;
using testing::to_double;
using testing::write_npy;

double dot(const std::vector<double>& a, const std::vector<double>& r) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// The attention op

struct AttnCase {
  int64_t B, T, C, H;
  float p;
};
void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " C" << c.C << " H" << c.H << " p" << c.p;
}

struct AttnResult {
  std::vector<float> y, lse, dqkv;
};

// Forward and backward of one backend on the given qkv and dy.
AttnResult run_attention(Backend& be, const AttnCase& c, const std::vector<float>& qkv, const std::vector<float>& dy,
                         DType compute = DType::f32, uint64_t seed = 42) {
  AttnResult r;
  r.y.assign(c.B * c.T * c.C, 0.f);
  r.lse.assign(c.B * c.H * c.T, 0.f);
  r.dqkv.assign(qkv.size(), std::nanf(""));  // backward must write every element
  AttentionArgs a;
  a.batch = c.B; a.seq = c.T; a.heads = c.H; a.channels = c.C;
  a.compute = compute;
  a.dropout = c.p;
  a.seed = seed;
  a.qkv = qkv.data(); a.y = r.y.data(); a.lse = r.lse.data();
  be.attention_forward(a);
  be.attention_backward(a, dy.data(), r.dqkv.data());
  return r;
}

struct AttnInputs {
  std::vector<float> qkv, dy;
};
AttnInputs attn_inputs(const AttnCase& c, uint64_t seed = 1) {
  Rng rng(seed);
  return {randn(rng, c.B * c.T * 3 * c.C), randn(rng, c.B * c.T * c.C)};
}

Backend& cpu() { return backend_named("cpu"); }
Backend& ref() { return backend_named("reference"); }

class GptAttentionFlash : public ::testing::TestWithParam<AttnCase> {};

// y, lse and dqkv of the CPU flash kernels equal the naive reference's, with and without
// dropout (both draw the mask from backend/attention_dropout.h).
TEST_P(GptAttentionFlash, MatchesReference) {
  const AttnCase c = GetParam();
  const AttnInputs in = attn_inputs(c);
  const AttnResult got = run_attention(cpu(), c, in.qkv, in.dy), want = run_attention(ref(), c, in.qkv, in.dy);
  EXPECT_LT(rel_err(got.y, want.y), 1e-5) << "y";
  EXPECT_LT(rel_err(got.lse, want.lse), 1e-5) << "lse";
  EXPECT_LT(rel_err(got.dqkv, want.dqkv), 1e-5) << "dqkv";
  for (float v : got.dqkv) ASSERT_TRUE(std::isfinite(v));
  // Each third of dqkv on its own too: dq, dk and dv have different scales.
  for (int part = 0; part < 3; ++part) {
    std::vector<float> g, w;
    for (int64_t row = 0; row < c.B * c.T; ++row)
      for (int64_t k = 0; k < c.C; ++k) {
        g.push_back(got.dqkv[row * 3 * c.C + part * c.C + k]);
        w.push_back(want.dqkv[row * 3 * c.C + part * c.C + k]);
      }
    EXPECT_LT(rel_err(g, w), 1e-5) << "part " << part;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptAttentionFlash,
                         ::testing::Values(AttnCase{2, 5, 8, 2, 0.f},      // D 4: below one vector
                                           AttnCase{1, 1, 6, 2, 0.f},      // T 1
                                           AttnCase{2, 64, 32, 2, 0.f},    // T one whole tile
                                           AttnCase{1, 100, 24, 3, 0.f},   // T not a tile multiple, D 8
                                           AttnCase{2, 130, 40, 2, 0.f},   // three key tiles, D 20
                                           AttnCase{1, 67, 36, 1, 0.f},    // D 36: vectors plus a tail
                                           AttnCase{2, 5, 8, 2, 0.3f},     // dropout
                                           AttnCase{1, 130, 40, 2, 0.2f},  // dropout over tiles
                                           AttnCase{1, 1, 4, 1, 0.5f}),
                         [](const auto& info) {
                           const AttnCase& c = info.param;
                           return "B" + std::to_string(c.B) + "T" + std::to_string(c.T) + "C" + std::to_string(c.C) +
                                  "H" + std::to_string(c.H) + (c.p > 0 ? "_dropout" : "");
                         });

// The kernels' tasks are serial and own their outputs: 1 and 2 threads give the same bits.
TEST(GptAttention, BitwiseIdenticalForOneAndTwoThreads) {
  const AttnCase c{2, 130, 40, 2, 0.1f};
  const AttnInputs in = attn_inputs(c);
  const int keep = omp_get_max_threads();
  omp_set_num_threads(1);
  const AttnResult one = run_attention(cpu(), c, in.qkv, in.dy);
  omp_set_num_threads(2);
  const AttnResult two = run_attention(cpu(), c, in.qkv, in.dy);
  omp_set_num_threads(keep);
  EXPECT_EQ(0, std::memcmp(one.y.data(), two.y.data(), one.y.size() * 4));
  EXPECT_EQ(0, std::memcmp(one.lse.data(), two.lse.data(), one.lse.size() * 4));
  EXPECT_EQ(0, std::memcmp(one.dqkv.data(), two.dqkv.data(), one.dqkv.size() * 4));
}

// The mask drops about p of the entries, differs by seed, and p = 1 gives zeros (as torch).
TEST(GptAttention, DropoutMaskIsAPureFunctionWithRateP) {
  const float p = 0.3f;
  int64_t dropped = 0, n = 0, differ = 0;
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t i = 0; i < 200; ++i)
      for (int64_t j = 0; j <= i; ++j, ++n) {
        dropped += !attention_keep(7, 1, h, i, j, p);
        differ += attention_keep(7, 1, h, i, j, p) != attention_keep(8, 1, h, i, j, p);
        ASSERT_EQ(attention_keep(7, 1, h, i, j, p), attention_keep(7, 1, h, i, j, p));
      }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.01);
  EXPECT_GT(differ, n / 4);
  const AttnCase c{1, 9, 8, 2, 1.f};
  const AttnInputs in = attn_inputs(c);
  const AttnResult r = run_attention(cpu(), c, in.qkv, in.dy);
  for (float v : r.y) EXPECT_EQ(v, 0.f);
  // With dropout the output is not the p = 0 output (the mask is really applied).
  const AttnCase c0{1, 9, 8, 2, 0.f}, c3{1, 9, 8, 2, 0.3f};
  EXPECT_GT(rel_err(run_attention(cpu(), c3, in.qkv, in.dy).y, run_attention(cpu(), c0, in.qkv, in.dy).y), 1e-2);
}

// bf16 rounds q, k, v, p (and dy, dS in backward) to 8 significant bits: each operand is off by
// up to 2^-9 relative, a product by 2^-8. Scores of size |s| ~ 3 (unit inputs, D 16..32) then
// move by ~1e-2 absolute, which the softmax turns into ~1% relative changes of p; averaging over
// keys and the random signs of the errors bring outputs and gradients to a few 1e-3 of their
// scale (measured: y 2.9e-3 and 3.8e-3, lse 1.1e-3 and 1.5e-3, dqkv 2.4e-3 and 3.5e-3 for the
// two cases). Bar: 1e-2, about 3x the measured. The rounding must also be visible (> 1e-4), or
// bf16 ran as fp32.
TEST(GptAttention, Bf16WithinToleranceOfFp32) {
  for (const AttnCase c : {AttnCase{2, 70, 32, 2, 0.f}, AttnCase{1, 130, 48, 3, 0.1f}}) {
    const AttnInputs in = attn_inputs(c);
    const AttnResult bf = run_attention(cpu(), c, in.qkv, in.dy, DType::bf16);
    const AttnResult fp = run_attention(ref(), c, in.qkv, in.dy);
    const double ey = rel_err(bf.y, fp.y), eg = rel_err(bf.dqkv, fp.dqkv);
    std::printf("bf16 vs fp32 (T %lld, C %lld): y %.2e, lse %.2e, dqkv %.2e\n", static_cast<long long>(c.T),
                static_cast<long long>(c.C), ey, rel_err(bf.lse, fp.lse), eg);
    EXPECT_LT(ey, 1e-2);
    EXPECT_LT(rel_err(bf.lse, fp.lse), 1e-2);
    EXPECT_LT(eg, 1e-2);
    EXPECT_GT(ey, 1e-4);
    EXPECT_GT(eg, 1e-4);
  }
}

// The comparison can fail: one gradient element off by 0.1% of the scale is caught.
TEST(GptAttention, CheckCatchesAPerturbedGradient) {
  const AttnCase c{2, 70, 16, 2, 0.f};
  const AttnInputs in = attn_inputs(c);
  AttnResult got = run_attention(cpu(), c, in.qkv, in.dy);
  const AttnResult want = run_attention(ref(), c, in.qkv, in.dy);
  ASSERT_LT(rel_err(got.dqkv, want.dqkv), 1e-5);
  const float scale = std::abs(*std::max_element(want.dqkv.begin(), want.dqkv.end(),
                                                  [](float a, float b) { return std::abs(a) < std::abs(b); }));
  got.dqkv[got.dqkv.size() / 2] += 1e-3f * scale;
  EXPECT_GT(rel_err(got.dqkv, want.dqkv), 1e-5);
}

TEST(GptAttention, BadArgumentsAreErrors) {
  std::vector<float> buf(3 * 2 * 4 * 12, 0.f);
  AttentionArgs a;
  a.batch = 2; a.seq = 4; a.heads = 5; a.channels = 12;
  a.qkv = buf.data(); a.y = buf.data(); a.lse = buf.data();
  EXPECT_CONTAINS(error_of([&] { cpu().attention_forward(a); }), "qkv width 36 (3 * n_embd) is not divisible by 3 * n_head = 15");
  EXPECT_CONTAINS(error_of([&] { ref().attention_forward(a); }), "not divisible");
  a.heads = 3;
  a.dropout = 1.5f;
  EXPECT_CONTAINS(error_of([&] { cpu().attention_forward(a); }), "dropout probability must be in [0, 1]");
  a.dropout = 0.f;
  a.seq = 0;
  EXPECT_CONTAINS(error_of([&] { cpu().attention_forward(a); }), "must all be positive");
  a.seq = 4;
  a.lse = nullptr;
  EXPECT_CONTAINS(error_of([&] { cpu().attention_forward(a); }), "null pointer");
  a.lse = buf.data();
  EXPECT_CONTAINS(error_of([&] { cpu().attention_backward(a, nullptr, buf.data()); }), "null pointer");
  a.compute = DType::f16;
  EXPECT_CONTAINS(error_of([&] { cpu().attention_forward(a); }), "use f32 or bf16");
  a.compute = DType::bf16;
  EXPECT_FALSE(ref().supports(BackendOp::attention_bf16));
  EXPECT_TRUE(cpu().supports(BackendOp::attention_bf16));
  EXPECT_CONTAINS(error_of([&] { ref().attention_forward(a); }), "reference backend has no bf16 attention");
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

std::vector<double> layer_norm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>* b, int64_t C) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / C; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x[r * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (x[r * C + c] - mu) * (x[r * C + c] - mu) / C;
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = (x[r * C + c] - mu) / std::sqrt(var + 1e-5) * w[c] + (b ? (*b)[c] : 0.0);
  }
  return y;
}

// A LayerNorm with random weight and bias (not the 1 / 0 init: it would hide a w or b mix-up),
// forward on x and backward of r, onto non-zero starting gradients.
struct LnRun {
  ParamStore ps;
  std::unique_ptr<LayerNorm> ln;
  Arena arena;
  std::vector<float> x, r, g0;
  Tensor y, dx;
  LnRun(Shape shape, bool bias, uint64_t seed) {
    const int64_t C = shape.back();
    ln = std::make_unique<LayerNorm>(ps, "ln", C, bias);
    ps.finalize();
    Rng rng(seed);
    auto p = randn(rng, ps.size());
    std::copy(p.begin(), p.end(), ps.params());
    g0 = randn(rng, ps.size());
    std::copy(g0.begin(), g0.end(), ps.grads());
    x = randn(rng, numel_of(shape), 2.f);
    for (size_t i = 0; i < x.size(); ++i) x[i] += 3.f;  // a non-zero mean to take out
    r = randn(rng, numel_of(shape));
    Tensor xt = arena.tensor(shape);
    std::copy(x.begin(), x.end(), xt.f32());
    y = ln->forward(xt, arena);
    Tensor dy = arena.tensor(shape);
    std::copy(r.begin(), r.end(), dy.f32());
    dx = ln->backward(dy, arena);
  }
  // The gradient added to entry i (the starting gradient taken out).
  std::vector<double> added(size_t i) {
    const ParamEntry& e = ps.entries()[i];
    std::vector<double> g = to_double(ps.grad(i).f32(), numel_of(e.shape));
    for (size_t k = 0; k < g.size(); ++k) g[k] -= g0[e.offset + k];
    return g;
  }
};

TEST(GptLayerNorm, MatchesFiniteDifferences) {
  for (bool bias : {true, false}) {
    LnRun run({2, 3, 7}, bias, 11);
    const int64_t C = 7;
    auto xd = to_double(run.x), r = to_double(run.r);
    auto wd = to_double(run.ps.param(run.ln->weight).f32(), C);
    std::vector<double> bd = bias ? to_double(run.ps.param(run.ln->bias).f32(), C) : std::vector<double>{};
    auto L = [&] { return dot(layer_norm_ref(xd, wd, bias ? &bd : nullptr, C), r); };
    EXPECT_LT(rel_err(to_double(run.y.f32(), xd.size()), layer_norm_ref(xd, wd, bias ? &bd : nullptr, C)), 1e-5);
    EXPECT_LT(rel_err(to_double(run.dx.f32(), xd.size()), numgrad(xd, L)), 1e-4) << "dx bias=" << bias;
    EXPECT_LT(rel_err(run.added(run.ln->weight), numgrad(wd, L)), 1e-4) << "dweight bias=" << bias;
    if (bias) {
      EXPECT_LT(rel_err(run.added(run.ln->bias), numgrad(bd, L)), 1e-4) << "dbias";
    }
  }
}

TEST(GptLayerNorm, MatchesTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  for (bool bias : {true, false}) {
    const Shape shape = {3, 5, 16};
    const int64_t C = 16, n = numel_of(shape);
    LnRun run(shape, bias, 12);
    TempDir dir;
    write_npy(dir / "x.npy", run.x, shape);
    write_npy(dir / "dy.npy", run.r, shape);
    write_npy(dir / "weight.npy", run.ps.param(run.ln->weight).f32(), {C});
    if (bias) write_npy(dir / "bias.npy", run.ps.param(run.ln->bias).f32(), {C});
    ASSERT_EQ(run_python("gpt_layers_ref.py", "layernorm " + dir.path.string()), 0);
    EXPECT_LT(rel_err(to_double(run.y.f32(), n), read_npy(dir / "y_ref.npy")), 1e-5);
    EXPECT_LT(rel_err(to_double(run.dx.f32(), n), read_npy(dir / "dx_ref.npy")), 1e-5);
    EXPECT_LT(rel_err(run.added(run.ln->weight), read_npy(dir / "dweight_ref.npy")), 1e-5);
    if (bias) {
      EXPECT_LT(rel_err(run.added(run.ln->bias), read_npy(dir / "dbias_ref.npy")), 1e-5);
    }
  }
}

// Names and shapes as torch's; init 1 and 0; the `matrices` decay policy leaves both undecayed
// while it decays the attention's weight matrices (nanoGPT's two optimizer groups).
TEST(GptLayerNorm, NamesInitAndDecayPolicy) {
  ParamStore ps;
  LayerNorm ln(ps, "transformer.h.0.ln_1", 8);
  SelfAttentionOptions o;
  o.n_head = 2;
  SelfAttention attn(ps, "transformer.h.0.attn", 8, o);
  ps.finalize();
  ln.init();
  EXPECT_EQ(ps.entries()[ln.weight].name, "transformer.h.0.ln_1.weight");
  EXPECT_EQ(ps.entries()[ln.bias].name, "transformer.h.0.ln_1.bias");
  EXPECT_EQ(ps.entries()[ln.weight].shape, (Shape{8}));
  for (int64_t c = 0; c < 8; ++c) {
    EXPECT_EQ(ps.param(ln.weight).f32()[c], 1.f);
    EXPECT_EQ(ps.param(ln.bias).f32()[c], 0.f);
  }
  apply_decay_policy(ps, "matrices");
  for (const ParamEntry& e : ps.entries())
    EXPECT_EQ(e.decay, e.name.ends_with(".weight") && e.name.find("ln_1") == std::string::npos) << e.name;
  EXPECT_NE(ps.find("transformer.h.0.attn.c_attn.weight"), nullptr);
  EXPECT_EQ(ps.find("transformer.h.0.attn.c_attn.weight")->shape, (Shape{24, 8}));
  EXPECT_EQ(ps.find("transformer.h.0.attn.c_proj.bias")->shape, (Shape{8}));
}

// A 16-bit output (LayerNorm::forward with `out`, Backend::layer_norm_forward_half): bit for bit
// the fp32 output rounded by the Backend's conversion, with the same saved statistics, so the
// backward is unchanged; rows and widths cross the threading threshold and the vector tails. The
// reference backend refuses it by name.
TEST(GptLayerNorm, HalfOutputIsTheRoundedFp32Output) {
  for (int64_t C : {int64_t{5}, int64_t{40}, int64_t{384}})
    for (DType t : {DType::bf16, DType::f16}) {
      const int64_t rows = 200;
      ParamStore ps;
      LayerNorm ln(ps, "ln", C);
      ps.finalize();
      Rng rng(7);
      for (int64_t c = 0; c < C; ++c) {
        ps.param(ln.weight).f32()[c] = rng.uniform(0.5f, 1.5f);
        ps.param(ln.bias).f32()[c] = rng.uniform(-1.f, 1.f);
      }
      Arena arena;
      Tensor x = arena.tensor({rows, C});
      for (int64_t i = 0; i < rows * C; ++i) x.f32()[i] = rng.uniform(-3.f, 3.f) + 10.f;
      Tensor y32 = ln.forward(x, arena);
      std::vector<float> mean32(ln.mean, ln.mean + rows), rstd32(ln.rstd, ln.rstd + rows);
      std::vector<uint16_t> want(rows * C);
      ps.backend().convert(DType::f32, y32.f32(), t, want.data(), want.size());
      Tensor y16 = ln.forward(x, arena, t);
      ASSERT_EQ(y16.dtype, t);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), y16.data<uint16_t>())) << C << " " << dtype_name(t);
      EXPECT_TRUE(std::equal(mean32.begin(), mean32.end(), ln.mean)) << C;
      EXPECT_TRUE(std::equal(rstd32.begin(), rstd32.end(), ln.rstd)) << C;
    }
  ParamStore ps;
  ps.set_backend(backend_named("reference"));
  LayerNorm ln(ps, "ln", 8);
  ps.finalize();
  Arena arena;
  EXPECT_CONTAINS(error_of([&] { ln.forward(arena.tensor({2, 8}), arena, DType::bf16); }), "16-bit output");
}

TEST(GptLayerNorm, BadInputIsAnError) {
  ParamStore ps;
  LayerNorm ln(ps, "ln", 8, false);
  ps.finalize();
  Arena arena;
  EXPECT_CONTAINS(error_of([&] { ln.forward(arena.tensor({2, 7}), arena); }), "does not match normalized size 8");
  EXPECT_CONTAINS(error_of([&] { ln.backward(arena.tensor({2, 8}), arena); }), "backward called before forward");
  EXPECT_CONTAINS(error_of([&] { LayerNorm(ps, "ln2", 0); }), "must be positive");
}

// ---------------------------------------------------------------------------------------------
// SelfAttention

struct CsaCase {
  int64_t B, T, C, H;
  bool bias;
  float attn_p, resid_p;
};

// The layer in double, straight from nanoGPT's forward, with the dropout factors given:
// attn_factor [B, H, T, T] and resid_factor [B, T, C] (0 or 1/(1-p); 1 without dropout).
struct CsaRef {
  CsaCase c;
  std::vector<double> attn_factor, resid_factor;
  std::vector<double> forward(const std::vector<double>& x, const std::vector<double>& wa, const std::vector<double>& ba,
                              const std::vector<double>& wp, const std::vector<double>& bp) const {
    const int64_t B = c.B, T = c.T, C = c.C, H = c.H, D = C / H;
    std::vector<double> qkv(B * T * 3 * C), y(B * T * C, 0.0), out(B * T * C);
    for (int64_t n = 0; n < B * T; ++n)
      for (int64_t o = 0; o < 3 * C; ++o) {
        double s = c.bias ? ba[o] : 0.0;
        for (int64_t k = 0; k < C; ++k) s += x[n * C + k] * wa[o * C + k];
        qkv[n * 3 * C + o] = s;
      }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> p(i + 1);
          double m = -INFINITY, l = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += qkv[(b * T + i) * 3 * C + h * D + d] * qkv[(b * T + j) * 3 * C + C + h * D + d];
            m = std::max(m, p[j] = s / std::sqrt(double(D)));
          }
          for (int64_t j = 0; j <= i; ++j) l += p[j] = std::exp(p[j] - m);
          for (int64_t j = 0; j <= i; ++j) {
            const double pj = p[j] / l * attn_factor[((b * H + h) * T + i) * T + j];
            for (int64_t d = 0; d < D; ++d) y[(b * T + i) * C + h * D + d] += pj * qkv[(b * T + j) * 3 * C + 2 * C + h * D + d];
          }
        }
    for (int64_t n = 0; n < B * T; ++n)
      for (int64_t o = 0; o < C; ++o) {
        double s = c.bias ? bp[o] : 0.0;
        for (int64_t k = 0; k < C; ++k) s += y[n * C + k] * wp[o * C + k];
        out[n * C + o] = s * resid_factor[n * C + o];
      }
    return out;
  }
};

// A layer with random parameters, forward (training) and backward on random x and r.
struct CsaRun {
  CsaCase c;
  ParamStore ps;
  std::unique_ptr<SelfAttention> layer;
  Arena arena;
  std::vector<float> x, r, g0;
  Tensor y, dx;
  CsaRun(const CsaCase& cc, uint64_t seed, Backend& be = cpu()) : c(cc) {
    ps.set_backend(be);
    SelfAttentionOptions o;
    o.n_head = c.H; o.bias = c.bias; o.attn_dropout = c.attn_p; o.resid_dropout = c.resid_p;
    layer = std::make_unique<SelfAttention>(ps, "attn", c.C, o);
    ps.finalize();
    Rng rng(seed);
    auto p = randn(rng, ps.size(), 0.4f);
    std::copy(p.begin(), p.end(), ps.params());
    g0 = randn(rng, ps.size());
    std::copy(g0.begin(), g0.end(), ps.grads());
    x = randn(rng, c.B * c.T * c.C);
    r = randn(rng, c.B * c.T * c.C);
    Tensor xt = arena.tensor({c.B, c.T, c.C});
    std::copy(x.begin(), x.end(), xt.f32());
    y = layer->forward(xt, arena, true, 1234);
    Tensor dy = arena.tensor({c.B, c.T, c.C});
    std::copy(r.begin(), r.end(), dy.f32());
    dx = layer->backward(dy, arena);
  }
  std::vector<double> param(size_t i) { return to_double(ps.param(i).f32(), ps.param(i).numel()); }
  std::vector<double> added(size_t i) {
    const ParamEntry& e = ps.entries()[i];
    std::vector<double> g = to_double(ps.grad(i).f32(), numel_of(e.shape));
    for (size_t k = 0; k < g.size(); ++k) g[k] -= g0[e.offset + k];
    return g;
  }
  // The dropout factors this forward used, for the double forward and for torch.
  CsaRef reference() const {
    CsaRef ref{c, {}, {}};
    const int64_t B = c.B, T = c.T, H = c.H, N = B * T * c.C;
    ref.attn_factor.assign(B * H * T * T, 1.0);
    if (c.attn_p > 0)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < T; ++i)
            for (int64_t j = 0; j < T; ++j)
              ref.attn_factor[((b * H + h) * T + i) * T + j] =
                  attention_keep(resolve_seed(layer->attn_seed), b, h, i, j, c.attn_p) ? 1.0 / (1.0 - c.attn_p) : 0.0;
    ref.resid_factor.assign(N, 1.0);
    if (c.resid_p > 0)
      for (int64_t k = 0; k < N; ++k) ref.resid_factor[k] = layer->resid_drop.mask[k] ? 1.0 / (1.0 - c.resid_p) : 0.0;
    return ref;
  }
};

class GptCausalSelfAttention : public ::testing::TestWithParam<CsaCase> {};

TEST_P(GptCausalSelfAttention, MatchesFiniteDifferences) {
  const CsaCase c = GetParam();
  CsaRun run(c, 21);
  const CsaRef ref = run.reference();
  SelfAttention& l = *run.layer;
  auto xd = to_double(run.x), r = to_double(run.r);
  auto wa = run.param(l.in_proj.weight), wp = run.param(l.out_proj.weight);
  std::vector<double> ba = c.bias ? run.param(l.in_proj.bias) : std::vector<double>{};
  std::vector<double> bp = c.bias ? run.param(l.out_proj.bias) : std::vector<double>{};
  auto L = [&] { return dot(ref.forward(xd, wa, ba, wp, bp), r); };
  EXPECT_LT(rel_err(to_double(run.y.f32(), xd.size()), ref.forward(xd, wa, ba, wp, bp)), 1e-5) << "y";
  EXPECT_LT(rel_err(to_double(run.dx.f32(), xd.size()), numgrad(xd, L)), 1e-4) << "dx";
  EXPECT_LT(rel_err(run.added(l.in_proj.weight), numgrad(wa, L)), 1e-4) << "dc_attn.weight";
  EXPECT_LT(rel_err(run.added(l.out_proj.weight), numgrad(wp, L)), 1e-4) << "dc_proj.weight";
  if (c.bias) {
    EXPECT_LT(rel_err(run.added(l.in_proj.bias), numgrad(ba, L)), 1e-4) << "dc_attn.bias";
    EXPECT_LT(rel_err(run.added(l.out_proj.bias), numgrad(bp, L)), 1e-4) << "dc_proj.bias";
  }
}

TEST_P(GptCausalSelfAttention, MatchesTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const CsaCase c = GetParam();
  CsaRun run(c, 22);
  const CsaRef ref = run.reference();
  SelfAttention& l = *run.layer;
  TempDir dir;
  const std::vector<int64_t> meta = {c.H, c.bias ? 1 : 0};
  write_npy(dir / "meta.npy", meta, {2});
  write_npy(dir / "x.npy", run.x, {c.B, c.T, c.C});
  write_npy(dir / "dy.npy", run.r, {c.B, c.T, c.C});
  write_npy(dir / "attn_factor.npy", ref.attn_factor, {c.B, c.H, c.T, c.T});
  write_npy(dir / "resid_factor.npy", ref.resid_factor, {c.B, c.T, c.C});
  std::vector<std::pair<std::string, size_t>> params = {{"c_attn.weight", l.in_proj.weight}, {"c_proj.weight", l.out_proj.weight}};
  if (c.bias) {
    params.push_back({"c_attn.bias", l.in_proj.bias});
    params.push_back({"c_proj.bias", l.out_proj.bias});
  }
  for (const auto& [name, i] : params) write_npy(dir / (name + ".npy"), run.ps.param(i).f32(), run.ps.param(i).shape);
  ASSERT_EQ(run_python("gpt_layers_ref.py", "attention " + dir.path.string()), 0);
  const int64_t n = c.B * c.T * c.C;
  EXPECT_LT(rel_err(to_double(run.y.f32(), n), read_npy(dir / "y_ref.npy")), 1e-5) << "y";
  EXPECT_LT(rel_err(to_double(run.dx.f32(), n), read_npy(dir / "dx_ref.npy")), 1e-5) << "dx";
  for (const auto& [name, i] : params)
    EXPECT_LT(rel_err(run.added(i), read_npy(dir / ("d" + name + "_ref.npy"))), 1e-5) << name;
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptCausalSelfAttention,
                         ::testing::Values(CsaCase{2, 5, 8, 2, true, 0.f, 0.f}, CsaCase{1, 7, 12, 3, false, 0.f, 0.f},
                                           CsaCase{2, 6, 8, 2, true, 0.25f, 0.2f}),
                         [](const auto& info) {
                           const CsaCase& c = info.param;
                           return "B" + std::to_string(c.B) + "T" + std::to_string(c.T) + "C" + std::to_string(c.C) +
                                  "H" + std::to_string(c.H) + (c.bias ? "" : "_nobias") +
                                  (c.attn_p > 0 ? "_dropout" : "");
                         });

// The layer gives the same results on the reference backend (its attention, Linear and
// everything), and in evaluation drops nothing.
TEST(GptCausalSelfAttentionLayer, SameOnBothBackendsAndEvalIsDeterministic) {
  const CsaCase c{2, 70, 16, 2, true, 0.2f, 0.1f};
  CsaRun a(c, 23), b(c, 23, ref());
  const int64_t n = c.B * c.T * c.C;
  EXPECT_LT(rel_err(to_double(a.y.f32(), n), to_double(b.y.f32(), n)), 1e-5);
  EXPECT_LT(rel_err(to_double(a.dx.f32(), n), to_double(b.dx.f32(), n)), 1e-5);
  EXPECT_LT(rel_err(a.added(a.layer->in_proj.weight), b.added(b.layer->in_proj.weight)), 1e-5);
  Arena arena;
  Tensor x = arena.tensor({c.B, c.T, c.C});
  std::copy(a.x.begin(), a.x.end(), x.f32());
  Tensor e1 = a.layer->forward(x, arena, false, 1), e2 = a.layer->forward(x, arena, false, 2);
  EXPECT_EQ(0, std::memcmp(e1.f32(), e2.f32(), n * 4));
}

TEST(GptCausalSelfAttentionLayer, BadInputIsAnError) {
  ParamStore ps;
  SelfAttentionOptions o;
  o.n_head = 3;
  EXPECT_CONTAINS(error_of([&] { SelfAttention(ps, "attn", 10, o); }),
                  "n_embd 10 must be a positive multiple of n_head 3 (the qkv width 3 * n_embd = 30");
  o.n_head = 2;
  o.precision = DType::f16;
  EXPECT_CONTAINS(error_of([&] { SelfAttention(ps, "attn2", 8, o); }), "use f32 or bf16");
  ParamStore ps_ref;
  ps_ref.set_backend(ref());
  o.precision = DType::bf16;
  EXPECT_CONTAINS(error_of([&] { SelfAttention(ps_ref, "attn", 8, o); }), "reference backend has no bf16 attention");
  ParamStore ok;
  o.precision = DType::f32;
  SelfAttention layer(ok, "attn", 8, o);
  ok.finalize();
  Arena arena;
  EXPECT_CONTAINS(error_of([&] { layer.forward(arena.tensor({2, 3, 6}), arena, true, 0); }),
                  "must be a contiguous [B, T, 8]");
  EXPECT_CONTAINS(error_of([&] { layer.forward(arena.tensor({6, 8}), arena, true, 0); }), "[B, T, 8]");
  EXPECT_CONTAINS(error_of([&] { layer.backward(arena.tensor({2, 3, 8}), arena); }), "backward called before forward");
}

}  // namespace
}  // namespace seqtrain
