// Tests for the CPU GEMM wrapper and the simple layers (Linear, Dropout, Embedding, activations).
// Gradient checks: every layer's f32 analytic backward is compared with central finite
// differences of L = sum(r * y) taken on a naive double-precision forward written here, for the
// input and every parameter. Parity checks run the same inputs through torch.nn (float64).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/arena.h"
#include "core/rng.h"
#include "nn/activation.h"
#include "backend/cpu/kernels/fast_math.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/params.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::randn;
using testing::numgrad;
using testing::read_npy;
using testing::rel_err;
using testing::run_python;
using testing::TempDir;
using testing::to_double;
using testing::write_npy;

void copy_into(const Tensor& t, const std::vector<float>& v) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  std::copy(v.begin(), v.end(), t.f32());
}

double dot(const std::vector<double>& a, const std::vector<double>& r) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// GEMM

// C = alpha op(A) op(B) + beta C, naive, in double, with the same row-major/ld conventions.
void naive_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const std::vector<float>& A,
                int64_t lda, const std::vector<float>& B, int64_t ldb, double beta, std::vector<double>& C,
                int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(ta ? A[k * lda + i] : A[i * lda + k]) * double(tb ? B[j * ldb + k] : B[k * ldb + j]);
      C[i * ldc + j] = alpha * s + (beta == 0 ? 0.0 : beta * C[i * ldc + j]);
    }
}

TEST(LayersGemm, MatchesNaiveForAllTransposesAndStrides) {
  Rng rng(1);
  const int64_t M = 13, N = 9, K = 17, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.f, 0.3f}) {
        const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        auto A = randn(rng, (ta ? K : M) * lda), B = randn(rng, (tb ? N : K) * ldb);
        auto C = randn(rng, M * ldc);
        // With beta = 0 the old C must not be read: NaN there would leak into the result.
        if (beta == 0.f) std::fill(C.begin(), C.end(), std::nanf(""));
        std::vector<double> ref(C.begin(), C.end());
        naive_gemm(ta, tb, M, N, K, 0.7, A, lda, B, ldb, beta, ref, ldc);
        gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
        std::vector<double> got, want;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) { got.push_back(C[i * ldc + j]); want.push_back(ref[i * ldc + j]); }
        EXPECT_LT(rel_err(got, want), 1e-5) << "ta=" << ta << " tb=" << tb << " beta=" << beta;
      }
}

TEST(LayersGemm, EmptySizesAreNoOpsAndKZeroAppliesBeta) {
  std::vector<float> A(4, 1.f), B(4, 1.f), C = {1.f, 2.f, 3.f, 4.f};
  gemm(false, false, 0, 2, 2, 1.f, A.data(), 2, B.data(), 2, 0.f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  gemm(false, false, 2, 2, 0, 1.f, A.data(), 1, B.data(), 2, 0.5f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
}

TEST(LayersGemm, BadLeadingDimensionThrows) {
  std::vector<float> A(64), B(64), C(64);
  EXPECT_THROW(gemm(false, false, 4, 4, 4, 1.f, A.data(), 3, B.data(), 4, 0.f, C.data(), 4), Error);
  EXPECT_THROW(gemm(false, true, 4, 4, 4, 1.f, A.data(), 4, B.data(), 3, 0.f, C.data(), 4), Error);
  EXPECT_THROW(gemm(false, false, 4, 4, 4, 1.f, A.data(), 4, B.data(), 4, 0.f, C.data(), 2), Error);
}

// ---------------------------------------------------------------------------------------------
// Linear

// y[n, o] = sum_i x[n, i] w[o, i] + b[o], in double.
std::vector<double> linear_ref(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* b,
                               int64_t N, int64_t in, int64_t out) {
  std::vector<double> y(N * out);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[n * in + i] * w[o * in + i];
      y[n * out + o] = s;
    }
  return y;
}

struct LinearCase { Shape xshape; int64_t out; bool bias; };
void PrintTo(const LinearCase& c, std::ostream* os) {
  *os << "x" << shape_str(c.xshape) << " out=" << c.out << (c.bias ? " bias" : " no bias");
}

class LayersLinearGrad : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LayersLinearGrad, MatchesFiniteDifferences) {
  const auto [xshape, out, has_bias] = GetParam();
  const int64_t in = xshape.back(), N = numel_of(xshape) / in;
  ParamStore ps;
  Linear lin(ps, "head", in, out, has_bias);
  ps.finalize();
  Rng rng(7);
  lin.init(rng);
  // Non-zero starting gradients: backward must add to them, not overwrite.
  auto g0 = randn(rng, ps.size());
  std::copy(g0.begin(), g0.end(), ps.grads());
  auto xf = randn(rng, N * in), rf = randn(rng, N * out);
  Arena arena;
  Tensor x = arena.tensor(xshape);
  copy_into(x, xf);
  Tensor y = lin.forward(x, arena);
  Shape yshape = xshape;
  yshape.back() = out;
  ASSERT_EQ(y.shape, yshape);
  Tensor dy = arena.tensor(yshape);
  copy_into(dy, rf);
  Tensor dx = lin.backward(dy, arena);
  ASSERT_EQ(dx.shape, xshape);

  auto xd = to_double(xf), r = to_double(rf);
  auto wd = to_double(ps.param(lin.weight).f32(), out * in);
  std::vector<double> bd = has_bias ? to_double(ps.param(lin.bias).f32(), out) : std::vector<double>{};
  auto L = [&] { return dot(linear_ref(xd, wd, has_bias ? &bd : nullptr, N, in, out), r); };
  EXPECT_LT(rel_err(to_double(y.f32(), N * out), linear_ref(xd, wd, has_bias ? &bd : nullptr, N, in, out)), 1e-5);
  EXPECT_LT(rel_err(to_double(dx.f32(), N * in), numgrad(xd, L)), 1e-3) << "dx";
  auto dw = to_double(ps.grad(lin.weight).f32(), out * in);
  auto go = ps.entries()[lin.weight].offset;
  for (int64_t i = 0; i < out * in; ++i) dw[i] -= g0[go + i];
  EXPECT_LT(rel_err(dw, numgrad(wd, L)), 1e-3) << "dweight";
  if (has_bias) {
    auto db = to_double(ps.grad(lin.bias).f32(), out);
    auto bo = ps.entries()[lin.bias].offset;
    for (int64_t i = 0; i < out; ++i) db[i] -= g0[bo + i];
    EXPECT_LT(rel_err(db, numgrad(bd, L)), 1e-3) << "dbias";
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, LayersLinearGrad,
                         ::testing::Values(LinearCase{{5, 7}, 4, true}, LinearCase{{2, 3, 6}, 5, true},
                                           LinearCase{{4, 3}, 1, false}, LinearCase{{1, 1}, 3, true}),
                         [](const auto& info) {
                           std::string name;
                           for (int64_t d : info.param.xshape) {
                             if (!name.empty()) name += 'x';
                             name += std::to_string(d);
                           }
                           return name + "_to" + std::to_string(info.param.out) + (info.param.bias ? "" : "_nobias");
                         });

// The checker itself must be able to fail: a gradient off by 1% in its largest entry is caught.
TEST(LayersLinear, GradCheckDetectsAWrongGradient) {
  const int64_t N = 4, in = 5, out = 3;
  ParamStore ps;
  Linear lin(ps, "head", in, out);
  ps.finalize();
  Rng rng(3);
  lin.init(rng);
  auto xf = randn(rng, N * in), rf = randn(rng, N * out);
  Arena arena;
  Tensor x = arena.tensor({N, in});
  copy_into(x, xf);
  lin.forward(x, arena);
  Tensor dy = arena.tensor({N, out});
  copy_into(dy, rf);
  lin.backward(dy, arena);
  auto xd = to_double(xf), r = to_double(rf);
  auto wd = to_double(ps.param(lin.weight).f32(), out * in);
  auto bd = to_double(ps.param(lin.bias).f32(), out);
  auto dw = to_double(ps.grad(lin.weight).f32(), out * in);
  auto num = numgrad(wd, [&] { return dot(linear_ref(xd, wd, &bd, N, in, out), r); });
  ASSERT_LT(rel_err(dw, num), 1e-3);
  auto big = std::max_element(dw.begin(), dw.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
  *big *= 1.01;
  EXPECT_GT(rel_err(dw, num), 1e-3);
}

TEST(LayersLinear, RegistersTorchNamesAndShapes) {
  ParamStore ps;
  Linear a(ps, "head", 6, 2);
  Linear b(ps, "proj", 3, 4, false);
  ASSERT_EQ(ps.entries().size(), 3u);
  EXPECT_EQ(ps.entries()[a.weight].name, "head.weight");
  EXPECT_EQ(ps.entries()[a.weight].shape, (Shape{2, 6}));
  EXPECT_EQ(ps.entries()[a.bias].name, "head.bias");
  EXPECT_EQ(ps.entries()[a.bias].shape, (Shape{2}));
  EXPECT_EQ(ps.entries()[b.weight].name, "proj.weight");
  EXPECT_EQ(ps.find("proj.bias"), nullptr);
}

TEST(LayersLinear, InitIsTorchDefaultUniform) {
  const int64_t in = 64, out = 256;
  ParamStore ps;
  Linear lin(ps, "head", in, out);
  ps.finalize();
  Rng rng(11);
  lin.init(rng);
  const double bound = 1.0 / std::sqrt(double(in));
  const float* w = ps.param(lin.weight).f32();
  double mean = 0, sq = 0, mx = 0;
  for (int64_t i = 0; i < in * out; ++i) { mean += w[i]; sq += double(w[i]) * w[i]; mx = std::max(mx, std::abs(double(w[i]))); }
  mean /= in * out;
  sq /= in * out;
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.99 * bound);
  EXPECT_NEAR(mean, 0.0, 0.01 * bound * 5);
  EXPECT_NEAR(sq, bound * bound / 3, 0.05 * bound * bound / 3);  // variance of U(-a, a) is a^2/3
  const float* b = ps.param(lin.bias).f32();
  for (int64_t i = 0; i < out; ++i) EXPECT_LE(std::abs(b[i]), bound);
  // Same seed, same weights.
  std::vector<float> first(w, w + in * out);
  Rng again(11);
  lin.init(again);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), w));
}

TEST(LayersLinear, ShapeMismatchNamesBothShapes) {
  ParamStore ps;
  Linear lin(ps, "head", 7, 4);
  ps.finalize();
  Arena arena;
  Tensor x = arena.zeros({3, 5});
  try {
    lin.forward(x, arena);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[3, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4, 7]"), std::string::npos) << msg;
  }
  Tensor ok = arena.zeros({3, 7});
  lin.forward(ok, arena);
  EXPECT_THROW(lin.backward(arena.zeros({3, 5}), arena), Error);
  EXPECT_THROW(Linear(ps, "bad", 0, 3), Error);
}

TEST(LayersLinear, EmptyBatchIsFine) {
  ParamStore ps;
  Linear lin(ps, "head", 3, 2);
  ps.finalize();
  Arena arena;
  Tensor y = lin.forward(arena.zeros({0, 3}), arena);
  EXPECT_EQ(y.shape, (Shape{0, 2}));
  Tensor dx = lin.backward(arena.zeros({0, 2}), arena);
  EXPECT_EQ(dx.shape, (Shape{0, 3}));
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps.grads()[i], 0.f);
}

TEST(LayersTorch, LinearMatchesTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const Shape xshape{3, 4, 10};
  const int64_t in = 10, out = 6, N = 12;
  ParamStore ps;
  Linear lin(ps, "head", in, out);
  ps.finalize();
  Rng rng(5);
  lin.init(rng);
  auto xf = randn(rng, N * in), rf = randn(rng, N * out);
  Arena arena;
  Tensor x = arena.tensor(xshape);
  copy_into(x, xf);
  Tensor y = lin.forward(x, arena);
  Tensor dy = arena.tensor({3, 4, out});
  copy_into(dy, rf);
  Tensor dx = lin.backward(dy, arena);

  TempDir dir;
  write_npy(dir / "x.npy", xf, xshape);
  write_npy(dir / "weight.npy", ps.param(lin.weight).f32(), {out, in});
  write_npy(dir / "bias.npy", ps.param(lin.bias).f32(), {out});
  write_npy(dir / "dy.npy", rf, {3, 4, out});
  ASSERT_EQ(run_python("layers_ref.py", "linear " + dir.path.string()), 0);
  std::vector<int64_t> shape;
  auto y_ref = read_npy(dir / "y_ref.npy", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 4, out}));
  EXPECT_LT(rel_err(to_double(y.f32(), N * out), y_ref), 1e-5);
  EXPECT_LT(rel_err(to_double(dx.f32(), N * in), read_npy(dir / "dx_ref.npy")), 1e-5);
  EXPECT_LT(rel_err(to_double(ps.grad(lin.weight).f32(), out * in), read_npy(dir / "dweight_ref.npy")), 1e-5);
  EXPECT_LT(rel_err(to_double(ps.grad(lin.bias).f32(), out), read_npy(dir / "dbias_ref.npy")), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Embedding

TEST(LayersEmbedding, MatchesFiniteDifferences) {
  const int64_t V = 6, D = 4;
  const std::vector<int64_t> ids = {2, 0, 5, 2, 2, 3, 0};  // repeats: gradients must add up
  const int64_t N = ids.size();
  ParamStore ps;
  Embedding emb(ps, "tok", V, D);
  ps.finalize();
  Rng rng(9);
  emb.init(rng);
  auto g0 = randn(rng, ps.size());
  std::copy(g0.begin(), g0.end(), ps.grads());
  auto rf = randn(rng, N * D);
  Arena arena;
  Tensor idt(const_cast<int64_t*>(ids.data()), {N}, DType::i64);
  Tensor y = emb.forward(idt, arena);
  ASSERT_EQ(y.shape, (Shape{N, D}));
  Tensor dy = arena.tensor({N, D});
  copy_into(dy, rf);
  emb.backward(dy, arena);

  auto wd = to_double(ps.param(emb.weight).f32(), V * D), r = to_double(rf);
  auto ref = [&] {
    std::vector<double> out(N * D);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < D; ++j) out[i * D + j] = wd[ids[i] * D + j];
    return out;
  };
  EXPECT_EQ(rel_err(to_double(y.f32(), N * D), ref()), 0.0);
  auto dw = to_double(ps.grad(emb.weight).f32(), V * D);
  for (int64_t i = 0; i < V * D; ++i) dw[i] -= g0[i];
  EXPECT_LT(rel_err(dw, numgrad(wd, [&] { return dot(ref(), r); })), 1e-3);
  // Row 1 and 4 were never looked up: their gradient stays exactly what it was.
  for (int64_t row : {1, 4})
    for (int64_t j = 0; j < D; ++j) EXPECT_EQ(ps.grad(emb.weight).f32()[row * D + j], g0[row * D + j]);
}

TEST(LayersEmbedding, TwoDimensionalIdsAndIdsCopied) {
  ParamStore ps;
  Embedding emb(ps, "tok", 5, 3);
  ps.finalize();
  Rng rng(2);
  emb.init(rng);
  std::vector<int64_t> ids = {4, 1, 0, 4, 3, 2};
  Arena arena;
  Tensor y = emb.forward(Tensor(ids.data(), {2, 3}, DType::i64), arena);
  EXPECT_EQ(y.shape, (Shape{2, 3, 3}));
  // The caller may reuse its id buffer before backward; backward must use the ids it saw.
  std::fill(ids.begin(), ids.end(), 0);
  Tensor dy = arena.tensor({2, 3, 3});
  std::fill(dy.f32(), dy.f32() + 18, 1.f);
  emb.backward(dy, arena);
  const float* dw = ps.grad(emb.weight).f32();
  const float want_rows[5] = {1, 1, 1, 1, 2};  // id 4 appears twice
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(dw[r * 3 + j], want_rows[r]) << "row " << r;
}

TEST(LayersEmbedding, OutOfRangeIdNamesIdAndVocab) {
  ParamStore ps;
  Embedding emb(ps, "tok", 10, 3);
  ps.finalize();
  Arena arena;
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{12345}}) {
    std::vector<int64_t> ids = {1, bad, 2};
    try {
      emb.forward(Tensor(ids.data(), {3}, DType::i64), arena);
      FAIL() << "expected an Error for id " << bad;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("id " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("10"), std::string::npos) << msg;
    }
  }
  std::vector<float> wrong_type(3);
  EXPECT_THROW(emb.forward(Tensor(wrong_type.data(), {3}), arena), Error);
}

TEST(LayersEmbedding, InitIsStandardNormal) {
  ParamStore ps;
  Embedding emb(ps, "tok", 200, 100);
  ps.finalize();
  EXPECT_EQ(ps.entries()[emb.weight].name, "tok.weight");
  EXPECT_EQ(ps.entries()[emb.weight].shape, (Shape{200, 100}));
  Rng rng(4);
  emb.init(rng);
  double mean = 0, sq = 0;
  const int64_t n = 200 * 100;
  for (int64_t i = 0; i < n; ++i) { mean += ps.params()[i]; sq += double(ps.params()[i]) * ps.params()[i]; }
  mean /= n;
  sq = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.03);  // 5 standard errors of 1/sqrt(20000)
  EXPECT_NEAR(sq, 1.0, 0.05);
}

TEST(LayersTorch, EmbeddingMatchesTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const int64_t V = 11, D = 5;
  std::vector<int64_t> ids = {3, 10, 0, 3, 7, 7, 7, 1};
  const int64_t N = ids.size();
  ParamStore ps;
  Embedding emb(ps, "tok", V, D);
  ps.finalize();
  Rng rng(8);
  emb.init(rng);
  auto rf = randn(rng, N * D);
  Arena arena;
  Tensor y = emb.forward(Tensor(ids.data(), {2, 4}, DType::i64), arena);
  Tensor dy = arena.tensor({2, 4, D});
  copy_into(dy, rf);
  emb.backward(dy, arena);
  TempDir dir;
  write_npy(dir / "ids.npy", ids, {2, 4});
  write_npy(dir / "weight.npy", ps.param(emb.weight).f32(), {V, D});
  write_npy(dir / "dy.npy", rf, {2, 4, D});
  ASSERT_EQ(run_python("layers_ref.py", "embedding " + dir.path.string()), 0);
  EXPECT_LT(rel_err(to_double(y.f32(), N * D), read_npy(dir / "y_ref.npy")), 1e-5);
  EXPECT_LT(rel_err(to_double(ps.grad(emb.weight).f32(), V * D), read_npy(dir / "dweight_ref.npy")), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// Activations

double act_ref(ActKind k, double x) {
  switch (k) {
    case ActKind::relu: return x > 0 ? x : 0;
    case ActKind::tanh: return std::tanh(x);
    case ActKind::sigmoid: return 1 / (1 + std::exp(-x));
    case ActKind::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case ActKind::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

const ActKind kAllActs[] = {ActKind::relu, ActKind::tanh, ActKind::sigmoid, ActKind::gelu, ActKind::gelu_tanh};

class LayersActivationGrad : public ::testing::TestWithParam<ActKind> {};

TEST_P(LayersActivationGrad, MatchesFiniteDifferences) {
  const ActKind k = GetParam();
  const int64_t n = 200;
  Rng rng(21);
  auto xf = randn(rng, n, 2.5f), rf = randn(rng, n);
  // Keep ReLU's kink out of reach of the finite-difference step.
  for (auto& v : xf) if (std::abs(v) < 1e-3f) v = 0.5f;
  xf[0] = 12.f, xf[1] = -12.f;  // saturated tails
  Activation act(k);
  Arena arena;
  Tensor x = arena.tensor({10, 20});
  copy_into(x, xf);
  Tensor y = act.forward(x, arena);
  Tensor dy = arena.tensor({10, 20});
  copy_into(dy, rf);
  Tensor dx = act.backward(dy, arena);
  ASSERT_EQ(dx.shape, (Shape{10, 20}));

  auto xd = to_double(xf), r = to_double(rf);
  auto fwd = [&] {
    std::vector<double> out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = act_ref(k, xd[i]);
    return out;
  };
  EXPECT_LT(rel_err(to_double(y.f32(), n), fwd()), 1e-6) << activation_name(k);
  EXPECT_LT(rel_err(to_double(dx.f32(), n), numgrad(xd, [&] { return dot(fwd(), r); })), 1e-3) << activation_name(k);
}

INSTANTIATE_TEST_SUITE_P(Layers, LayersActivationGrad, ::testing::ValuesIn(kAllActs),
                         [](const auto& info) { return std::string(activation_name(info.param)); });

TEST(LayersActivation, ParseNamesAndErrors) {
  for (ActKind k : kAllActs) EXPECT_EQ(parse_activation(std::string(activation_name(k))), k);
  try {
    parse_activation("swish");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("swish"), std::string::npos);
    EXPECT_NE(msg.find("gelu_tanh"), std::string::npos) << msg;
  }
  EXPECT_EQ(GELU().kind, ActKind::gelu);
  EXPECT_EQ(GELU(true).kind, ActKind::gelu_tanh);
  EXPECT_EQ(ReLU().kind, ActKind::relu);
}

TEST(LayersActivation, LargeInputsUseThreadsAndMatchSmall) {
  // Above the parallel threshold the threaded loops must give the same values as element-wise.
  const int64_t n = (1 << 16) + 37;
  Rng rng(5);
  auto xf = randn(rng, n, 3.f), gf = randn(rng, n);
  for (ActKind k : kAllActs) {
    std::vector<float> y(n), dx(n), y1(1), dx1(1);
    activation_forward(k, xf.data(), y.data(), n);
    activation_backward(k, xf.data(), y.data(), gf.data(), dx.data(), n);
    for (int64_t i = 0; i < n; i += 4097) {
      activation_forward(k, &xf[i], y1.data(), 1);
      activation_backward(k, &xf[i], y1.data(), &gf[i], dx1.data(), 1);
      EXPECT_EQ(y[i], y1[0]);
      EXPECT_EQ(dx[i], dx1[0]);
    }
  }
}

// GELU with a 16-bit output (Backend::activation_forward_half, Activation::forward with `out`):
// bit for bit GELU into fp32 then the Backend's conversion, across the chunk and thread splits;
// the layer hands the 16-bit tensor on and its backward still reads x; what it is not for is
// refused by name.
TEST(LayersActivation, HalfOutputIsTheRoundedFp32Output) {
  Backend& cpu = backend_named("cpu");
  Rng rng(6);
  for (int64_t n : {int64_t{1}, int64_t{2048 * 3 + 5}, int64_t{(1 << 16) + 37}}) {
    auto xf = randn(rng, n, 3.f);
    for (ActKind k : {ActKind::gelu, ActKind::gelu_tanh})
      for (DType t : {DType::bf16, DType::f16}) {
        std::vector<float> y(n);
        std::vector<uint16_t> want(n), got(n, 0xdead);
        cpu.activation_forward(k, xf.data(), y.data(), n);
        cpu.convert(DType::f32, y.data(), t, want.data(), n);
        cpu.activation_forward_half(k, xf.data(), t, got.data(), n);
        EXPECT_EQ(got, want) << activation_name(k) << " " << dtype_name(t) << " n " << n;
      }
  }
  Arena arena;
  Tensor x = arena.tensor({3, 5});
  auto xv = randn(rng, 15, 2.f);
  std::copy(xv.begin(), xv.end(), x.f32());
  Activation gelu(ActKind::gelu, &cpu);
  Tensor y16 = gelu.forward(x, arena, DType::bf16);
  EXPECT_EQ(y16.dtype, DType::bf16);
  Tensor dy = arena.tensor({3, 5});
  std::fill(dy.f32(), dy.f32() + 15, 1.f);
  Tensor dx16 = gelu.backward(dy, arena);
  Activation gelu32(ActKind::gelu, &cpu);
  gelu32.forward(x, arena);
  Tensor dx32 = gelu32.backward(dy, arena);
  EXPECT_TRUE(std::equal(dx16.f32(), dx16.f32() + 15, dx32.f32()));  // backward is unchanged
  Activation relu(ActKind::relu, &cpu);
  EXPECT_CONTAINS(testing::error_of([&] { relu.forward(x, arena, DType::bf16); }), "GELU only");
  EXPECT_FALSE(backend_named("reference").supports(BackendOp::half_output));
  std::vector<uint16_t> out(15);
  EXPECT_CONTAINS(testing::error_of([&] {
                    backend_named("reference").activation_forward_half(ActKind::gelu, x.f32(), DType::bf16,
                                                                       out.data(), 15);
                  }),
                  "16-bit output");
}

TEST(LayersTorch, ActivationsMatchTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const int64_t n = 500;
  Rng rng(13);
  auto xf = randn(rng, n, 3.f), rf = randn(rng, n);
  xf[0] = 0.f;  // torch's ReLU gradient at 0 is 0, as ours
  xf[1] = 30.f;
  xf[2] = -30.f;
  TempDir dir;
  write_npy(dir / "x.npy", xf, {n});
  write_npy(dir / "dy.npy", rf, {n});
  // One interpreter start for all kinds: it is most of this test's time.
  ASSERT_EQ(run_python("layers_ref.py", "act " + dir.path.string()), 0);
  for (ActKind k : kAllActs) {
    Activation act(k);
    Arena arena;
    Tensor x = arena.tensor({n});
    copy_into(x, xf);
    Tensor y = act.forward(x, arena);
    Tensor dy = arena.tensor({n});
    copy_into(dy, rf);
    Tensor dx = act.backward(dy, arena);
    const std::string name(activation_name(k));
    EXPECT_LT(rel_err(to_double(y.f32(), n), read_npy(dir / ("y_" + name + "_ref.npy"))), 1e-5) << name;
    EXPECT_LT(rel_err(to_double(dx.f32(), n), read_npy(dir / ("dx_" + name + "_ref.npy"))), 1e-5) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout

// x with no zeros, so the kept mask can be read back from y != 0.
std::vector<float> nonzero_input(Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = (rng.uniform() < 0.5f ? -1.f : 1.f) * (0.5f + rng.uniform());
  return v;
}

TEST(LayersDropout, MaskIsReproducibleFromSeed) {
  const int64_t n = 10000;
  Rng rng(1);
  auto xf = nonzero_input(rng, n);
  Arena arena;
  Tensor x = arena.tensor({n});
  copy_into(x, xf);
  Dropout d(0.4f);
  auto run = [&](uint64_t seed) {
    Tensor y = d.forward(x, arena, true, seed);
    return std::vector<float>(y.f32(), y.f32() + n);
  };
  auto a = run(42), b = run(42), c = run(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The mask must not depend on how many threads drew it.
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor big = arena.tensor({20 * Dropout::kBlock + 5});
  std::fill(big.f32(), big.f32() + big.numel(), 1.f);
  Tensor y1 = d.forward(big, arena, true, 7);
  std::vector<float> one(y1.f32(), y1.f32() + big.numel());
  omp_set_num_threads(2);
  Tensor y2 = d.forward(big, arena, true, 7);
  omp_set_num_threads(saved);
  EXPECT_TRUE(std::equal(one.begin(), one.end(), y2.f32()));
}

TEST(LayersDropout, KeptFractionAndScale) {
  const int64_t n = 200000;
  for (float p : {0.1f, 0.3f, 0.75f}) {
    Rng rng(2);
    auto xf = nonzero_input(rng, n);
    Arena arena;
    Tensor x = arena.tensor({n});
    copy_into(x, xf);
    Dropout d(p);
    Tensor y = d.forward(x, arena, true, 99);
    const float scale = 1.f / (1.f - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y.f32()[i] == 0.f) continue;
      ++kept;
      ASSERT_FLOAT_EQ(y.f32()[i], xf[i] * scale) << "element " << i;
    }
    const double frac = double(kept) / n, sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(frac, 1.0 - p, 5 * sigma) << "p=" << p;
  }
}

TEST(LayersDropout, BackwardUsesTheForwardMask) {
  const int64_t n = 3000;
  const float p = 0.5f;
  Rng rng(3);
  auto xf = nonzero_input(rng, n), gf = randn(rng, n);
  Arena arena;
  Tensor x = arena.tensor({30, 100});
  copy_into(x, xf);
  Dropout d(p);
  Tensor y = d.forward(x, arena, true, 1234);
  Tensor dy = arena.tensor({30, 100});
  copy_into(dy, gf);
  Tensor dx = d.backward(dy, arena);
  ASSERT_EQ(dx.shape, (Shape{30, 100}));
  // Given the mask, dropout is linear: y = m * x / (1 - p). The double reference uses the mask
  // read back from y, and its finite-difference gradient must match backward.
  std::vector<double> m(n);
  for (int64_t i = 0; i < n; ++i) m[i] = y.f32()[i] != 0.f;
  auto xd = to_double(xf), r = to_double(gf);
  auto fwd = [&] {
    std::vector<double> out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = m[i] * xd[i] / (1.0 - p);
    return out;
  };
  EXPECT_LT(rel_err(to_double(y.f32(), n), fwd()), 1e-6);
  EXPECT_LT(rel_err(to_double(dx.f32(), n), numgrad(xd, [&] { return dot(fwd(), r); })), 1e-3);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dx.f32()[i] == 0.f, m[i] == 0.0) << "element " << i;
}

TEST(LayersDropout, EvalAndZeroPAreIdentity) {
  Rng rng(4);
  auto xf = nonzero_input(rng, 64);
  Arena arena;
  Tensor x = arena.tensor({8, 8});
  copy_into(x, xf);
  Tensor g = arena.tensor({8, 8});
  copy_into(g, xf);
  Dropout d(0.5f);
  Tensor y = d.forward(x, arena, /*training=*/false, 1);
  EXPECT_EQ(y.ptr, x.ptr);
  EXPECT_FALSE(d.active);
  EXPECT_EQ(d.backward(g, arena).ptr, g.ptr);
  Dropout zero(0.f);
  EXPECT_EQ(zero.forward(x, arena, true, 1).ptr, x.ptr);
  EXPECT_EQ(zero.backward(g, arena).ptr, g.ptr);
  // p = 1 drops everything, without NaN from 1/(1-p).
  Dropout all(1.f);
  Tensor z = all.forward(x, arena, true, 1);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(z.f32()[i], 0.f);
  EXPECT_THROW(Dropout(-0.1f), Error);
  EXPECT_THROW(Dropout(1.5f), Error);
  EXPECT_THROW(d.backward(arena.tensor({4, 4}), arena), Error);
}

}  // namespace
}  // namespace seqtrain

namespace seqtrain::testing {
namespace {
// backend/cpu/kernels/fast_math.h against libm in double over GELU's whole range, the far negative tail
// included (where 1 + erf is tiny and only a relative bound means anything): exp within 3e-7,
// Phi within 2e-6 relative (1e-5 past 6 sigma) and the e^{-x^2/2} it hands GELU's backward within
// 1.5e-6; and the check is shown able to fail (Phi(x) is not Phi(x + 1e-4)). The reference is
// Phi of the float x itself: the code rounds -x^2/2 once, and nothing else moves its argument.
TEST(LayersFastMath, ExpAndNormalCdfKeepFloatRelativeAccuracy) {
  double worst_exp = 0, worst_cdf = 0, worst_tail = 0, worst_gauss = 0;
  for (double x = -12.0; x <= 12.0; x += 1.0 / 512) {
    const float xf = static_cast<float>(x);
    const double e = std::exp(x), c = 0.5 * std::erfc(-static_cast<double>(xf) / std::sqrt(2.0));
    worst_exp = std::max(worst_exp, std::abs(exp_approx(xf) - e) / e);
    double& worst = std::abs(x) <= 6 ? worst_cdf : worst_tail;
    float gauss = 0;
    worst = std::max(worst, std::abs(normal_cdf(xf, &gauss) - c) / c);
    const double g = std::exp(-0.5 * static_cast<double>(xf) * xf);
    if (std::abs(x) <= 6) worst_gauss = std::max(worst_gauss, std::abs(gauss - g) / g);
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_cdf, 2e-6);
  EXPECT_LT(worst_gauss, 1.5e-6);
  // Beyond 6 sigma the exp's argument -x^2/2 nears -72, whose float rounding alone is ~4e-6
  // relative: still 2.5x inside the 1e-5 the layers are held to against PyTorch.
  EXPECT_LT(worst_tail, 1e-5);
  EXPECT_GT(std::abs(normal_cdf(-5.f) - 0.5 * std::erfc(5.0001 / std::sqrt(2.0))) / (0.5 * std::erfc(5.0001 / std::sqrt(2.0))), 1e-6);
  EXPECT_EQ(exp_approx(-200.f), exp_approx(-87.f)) << "clamped, never denormal";
  EXPECT_GT(exp_approx(-87.f), 0.f);
  EXPECT_EQ(normal_cdf(-40.f) >= 0.f, true);
  EXPECT_EQ(normal_cdf(40.f), 1.f);
}
}  // namespace
}  // namespace seqtrain::testing
