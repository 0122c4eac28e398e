// Tests for the GPT layers: LayerNorm, the causal self-attention op (the CPU backend's flash
// kernels against the reference backend's naive loops) and the CausalSelfAttention layer.
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
#include <string>
#include <vector>

#include "backend/attention_dropout.h"
#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "models/model.h"
#include "nn/causal_self_attention.h"
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
using testing::write_npy;

std::vector<double> to_double(const float* p, int64_t n) { return std::vector<double>(p, p + n); }
std::vector<double> to_double(const std::vector<float>& v) { return to_double(v.data(), v.size()); }

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

}  // namespace
}  // namespace seqtrain
