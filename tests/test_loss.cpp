// Tests for the losses (MSE, MAE, Huber, cross-entropy): f32 forward against a naive double
// reference written here, f32 backward against central finite differences of that reference,
// and parity with torch.nn's losses (float64) through tests/py/loss_ref.py.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/loss.h"
#include "test_util.h"

namespace seqtrain {
namespace {

using testing::randn;
using testing::numgrad;
using testing::read_npy;
using testing::rel_err;
using testing::run_python;
using testing::TempDir;
using testing::write_npy;

// Naive double references, straight from the definitions.
double regression_ref(LossKind k, const std::vector<double>& p, const std::vector<double>& y, double delta) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = p[i] - y[i], a = std::abs(d);
    if (k == LossKind::mse) s += d * d;
    else if (k == LossKind::mae) s += a;
    else s += a < delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
  }
  return s / p.size();
}

double ce_ref(const std::vector<double>& z, const std::vector<int64_t>& t, int64_t C, int64_t ignore) {
  double s = 0;
  int64_t kept = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == ignore) continue;
    double e = 0;
    for (int64_t j = 0; j < C; ++j) e += std::exp(z[i * C + j]);
    s += std::log(e) - z[i * C + t[i]];
    ++kept;
  }
  return s / kept;
}

struct RegCase { LossKind kind; float delta; };
void PrintTo(const RegCase& c, std::ostream* os) { *os << loss_name(c.kind) << " delta=" << c.delta; }

class LossRegressionGrad : public ::testing::TestWithParam<RegCase> {};

TEST_P(LossRegressionGrad, MatchesFiniteDifferences) {
  const auto [kind, delta] = GetParam();
  const int64_t n = 6 * 5;
  Rng rng(31);
  auto pf = randn(rng, n, 1.5f), yf = randn(rng, n);
  // Keep every |d| away from the kinks (0 for MAE, delta for Huber) so the finite difference
  // sees one smooth piece.
  for (int64_t i = 0; i < n; ++i) {
    const float d = pf[i] - yf[i];
    if (std::abs(d) < 1e-2f || std::abs(std::abs(d) - delta) < 1e-2f) pf[i] += 0.05f;
  }
  LossOptions opt;
  opt.huber_delta = delta;
  Tensor pred(pf.data(), {6, 5}), target(yf.data(), {6, 5});
  std::vector<float> gf(n);
  Tensor dpred(gf.data(), {6, 5});
  const float loss = loss_forward(kind, pred, target, opt);
  loss_backward(kind, pred, target, dpred, 1.f, opt);

  std::vector<double> pd(pf.begin(), pf.end()), yd(yf.begin(), yf.end());
  const double ref = regression_ref(kind, pd, yd, delta);
  EXPECT_NEAR(loss, ref, 1e-6 * std::abs(ref)) << loss_name(kind);
  auto num = numgrad(pd, [&] { return regression_ref(kind, pd, yd, delta); });
  EXPECT_LT(rel_err(gf, num), 1e-3) << loss_name(kind);
  // Huber must actually exercise both pieces, or the check above proves half of it.
  if (kind == LossKind::huber) {
    int inside = 0;
    for (int64_t i = 0; i < n; ++i) inside += std::abs(pf[i] - yf[i]) < delta;
    EXPECT_GT(inside, 0);
    EXPECT_LT(inside, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, LossRegressionGrad,
                         ::testing::Values(RegCase{LossKind::mse, 1.f}, RegCase{LossKind::mae, 1.f},
                                           RegCase{LossKind::huber, 1.f}, RegCase{LossKind::huber, 0.5f}),
                         [](const auto& info) {
                           return std::string(loss_name(info.param.kind)) + "_delta" +
                                  std::to_string(int(info.param.delta * 10));
                         });

TEST(LossCrossEntropy, MatchesFiniteDifferences) {
  const int64_t B = 3, T = 4, C = 5, N = B * T;
  Rng rng(41);
  auto zf = randn(rng, N * C, 2.f);
  std::vector<int64_t> t(N);
  for (auto& v : t) v = static_cast<int64_t>(rng.below(C));
  t[2] = -100;
  t[7] = -100;
  Tensor logits(zf.data(), {B, T, C}), target(t.data(), {B, T}, DType::i64);
  std::vector<float> gf(N * C, 123.f);  // every entry, ignored rows too, must be overwritten
  const float loss = loss_forward(LossKind::cross_entropy, logits, target);
  loss_backward(LossKind::cross_entropy, logits, target, Tensor(gf.data(), {B, T, C}));
  std::vector<double> zd(zf.begin(), zf.end());
  const double ref = ce_ref(zd, t, C, -100);
  EXPECT_NEAR(loss, ref, 1e-6 * ref);
  auto num = numgrad(zd, [&] { return ce_ref(zd, t, C, -100); });
  EXPECT_LT(rel_err(gf, num), 1e-3);
  for (int64_t j = 0; j < C; ++j) {
    EXPECT_EQ(gf[2 * C + j], 0.f);
    EXPECT_EQ(gf[7 * C + j], 0.f);
  }
}

TEST(LossCrossEntropy, LargeLogitsStayFinite) {
  std::vector<float> z = {1000.f, 0.f, -1000.f, 50.f, 3000.f, 3001.f};
  std::vector<int64_t> t = {2, 0};
  Tensor logits(z.data(), {2, 3}), target(t.data(), {2}, DType::i64);
  const float loss = loss_forward(LossKind::cross_entropy, logits, target);
  // Row 0: lse = 1000, loss 2000. Row 1: lse = 3001 + log(1 + e^-1), loss = that - 50.
  const double want = (2000.0 + (3001.0 + std::log1p(std::exp(-1.0)) - 50.0)) / 2;
  EXPECT_NEAR(loss, want, 1e-3);
  std::vector<float> g(6);
  loss_backward(LossKind::cross_entropy, logits, target, Tensor(g.data(), {2, 3}));
  for (float v : g) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(g[0], 0.5, 1e-6);
  EXPECT_NEAR(g[2], -0.5, 1e-6);
}

TEST(LossCrossEntropy, AllIgnoredGivesZeroNotNaN) {
  std::vector<float> z(6, 1.f);
  std::vector<int64_t> t = {-100, -100};
  Tensor logits(z.data(), {2, 3}), target(t.data(), {2}, DType::i64);
  EXPECT_EQ(loss_forward(LossKind::cross_entropy, logits, target), 0.f);
  std::vector<float> g(6, 5.f);
  loss_backward(LossKind::cross_entropy, logits, target, Tensor(g.data(), {2, 3}));
  for (float v : g) EXPECT_EQ(v, 0.f);
}

TEST(LossCrossEntropy, CustomIgnoreIndexAndBadTargets) {
  std::vector<float> z(6, 0.f);
  std::vector<int64_t> t = {1, 7};
  Tensor logits(z.data(), {2, 3}), target(t.data(), {2}, DType::i64);
  try {
    loss_forward(LossKind::cross_entropy, logits, target);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("target 7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 classes"), std::string::npos) << msg;
  }
  LossOptions opt;
  opt.ignore_index = 7;
  EXPECT_NEAR(loss_forward(LossKind::cross_entropy, logits, target, opt), std::log(3.0), 1e-6);
  t[1] = -100;  // no longer the ignore index, and negative
  EXPECT_THROW(loss_forward(LossKind::cross_entropy, logits, target, opt), Error);
  std::vector<float> wrong(2);
  EXPECT_THROW(loss_forward(LossKind::cross_entropy, logits, Tensor(wrong.data(), {2})), Error);
  std::vector<int64_t> three = {0, 1, 2};
  EXPECT_THROW(loss_forward(LossKind::cross_entropy, logits, Tensor(three.data(), {3}, DType::i64)), Error);
}

TEST(LossMae, GradientAtExactTieIsZero) {
  std::vector<float> p = {1.f, 2.f, 3.f, 4.f}, y = {1.f, 1.f, 3.f, 5.f};
  std::vector<float> g(4, 9.f);
  Tensor pred(p.data(), {4}), target(y.data(), {4});
  loss_backward(LossKind::mae, pred, target, Tensor(g.data(), {4}));
  EXPECT_EQ(g, (std::vector<float>{0.f, 0.25f, 0.f, -0.25f}));
  EXPECT_FLOAT_EQ(loss_forward(LossKind::mae, pred, target), 0.5f);
}

TEST(LossScale, BackwardIsScaledForEveryKind) {
  Rng rng(17);
  auto pf = randn(rng, 12), yf = randn(rng, 12);
  std::vector<int64_t> t = {0, 3, 1};
  for (LossKind k : {LossKind::mse, LossKind::mae, LossKind::huber, LossKind::cross_entropy}) {
    const bool ce = k == LossKind::cross_entropy;
    Tensor pred(pf.data(), ce ? Shape{3, 4} : Shape{12});
    Tensor target = ce ? Tensor(t.data(), {3}, DType::i64) : Tensor(yf.data(), {12});
    std::vector<float> g1(12), g2(12);
    loss_backward(k, pred, target, Tensor(g1.data(), pred.shape), 1.f);
    loss_backward(k, pred, target, Tensor(g2.data(), pred.shape), 0.25f);
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(g2[i], 0.25f * g1[i], 1e-7f) << loss_name(k) << " " << i;
  }
}

TEST(LossErrors, ShapeMismatchNamesBothShapes) {
  std::vector<float> a(12), b(12), g(12);
  for (LossKind k : {LossKind::mse, LossKind::mae, LossKind::huber}) {
    try {
      loss_forward(k, Tensor(a.data(), {3, 4}), Tensor(b.data(), {4, 3}));
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[3, 4]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[4, 3]"), std::string::npos) << msg;
    }
    EXPECT_THROW(loss_backward(k, Tensor(a.data(), {3, 4}), Tensor(b.data(), {3, 4}), Tensor(g.data(), {12})), Error);
  }
  LossOptions bad;
  bad.huber_delta = 0.f;
  EXPECT_THROW(loss_forward(LossKind::huber, Tensor(a.data(), {12}), Tensor(b.data(), {12}), bad), Error);
}

TEST(LossParse, NamesAndAliases) {
  EXPECT_EQ(parse_loss("mse"), LossKind::mse);
  EXPECT_EQ(parse_loss("mae"), LossKind::mae);
  EXPECT_EQ(parse_loss("l1"), LossKind::mae);
  EXPECT_EQ(parse_loss("huber"), LossKind::huber);
  EXPECT_EQ(parse_loss("cross_entropy"), LossKind::cross_entropy);
  EXPECT_EQ(parse_loss("ce"), LossKind::cross_entropy);
  for (LossKind k : {LossKind::mse, LossKind::mae, LossKind::huber, LossKind::cross_entropy})
    EXPECT_EQ(parse_loss(std::string(loss_name(k))), k);
  try {
    parse_loss("msle");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const char* name : {"msle", "mse", "mae", "huber", "cross_entropy"})
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

// ---------------------------------------------------------------------------------------------
// Parity with torch.nn

struct TorchCase { std::string name; LossKind kind; float delta; int64_t ignore_index; };

// All cases share one Python start (most of the time here): each case gets its own directory
// holding pred.npy, target.npy and spec.txt ("<loss> <delta or ignore_index>").
TEST(LossTorch, AllKindsMatchTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const std::vector<TorchCase> cases = {
      {"mse", LossKind::mse, 1.f, -100},
      {"mae", LossKind::mae, 1.f, -100},
      {"huber_1", LossKind::huber, 1.f, -100},
      {"huber_0p3", LossKind::huber, 0.3f, -100},
      {"cross_entropy", LossKind::cross_entropy, 1.f, -100},
      {"cross_entropy_ignore2", LossKind::cross_entropy, 1.f, 2},  // an ignore_index inside [0, C)
  };
  TempDir dir;
  std::vector<std::vector<float>> grads;
  std::vector<float> losses;
  std::string args;
  Rng rng(51);
  for (const auto& c : cases) {
    const std::string d = dir / c.name;
    std::filesystem::create_directory(d);
    LossOptions opt;
    opt.huber_delta = c.delta;
    opt.ignore_index = c.ignore_index;
    std::vector<float> g;
    std::ofstream spec(d + "/spec.txt");
    if (c.kind == LossKind::cross_entropy) {
      const int64_t B = 4, T = 6, C = 7, N = B * T;
      auto z = randn(rng, N * C, 3.f);
      std::vector<int64_t> t(N);
      for (auto& v : t) v = static_cast<int64_t>(rng.below(C));
      t[0] = t[9] = t[17] = c.ignore_index;
      Tensor logits(z.data(), {B, T, C}), target(t.data(), {B, T}, DType::i64);
      g.assign(N * C, 0.f);
      losses.push_back(loss_forward(c.kind, logits, target, opt));
      loss_backward(c.kind, logits, target, Tensor(g.data(), logits.shape), 1.f, opt);
      write_npy(d + "/pred.npy", z, {B, T, C});
      write_npy(d + "/target.npy", t, {B, T});
      spec << loss_name(c.kind) << " " << c.ignore_index << "\n";
    } else {
      const int64_t N = 16, H = 3;
      auto p = randn(rng, N * H, 2.f), y = randn(rng, N * H);
      p[4] = y[4];  // an exact tie: MAE's gradient there is 0 in both
      Tensor pred(p.data(), {N, H}), target(y.data(), {N, H});
      g.assign(N * H, 0.f);
      losses.push_back(loss_forward(c.kind, pred, target, opt));
      loss_backward(c.kind, pred, target, Tensor(g.data(), pred.shape), 1.f, opt);
      write_npy(d + "/pred.npy", p, {N, H});
      write_npy(d + "/target.npy", y, {N, H});
      // The f32 delta's exact decimal value, so torch uses the same number.
      spec << loss_name(c.kind) << " " << fmt::format("{:.9g}", c.delta) << "\n";
    }
    grads.push_back(std::move(g));
    args += " " + d;
  }
  ASSERT_EQ(run_python("loss_ref.py", args), 0);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const std::string d = dir / cases[i].name;
    const auto loss_ref = read_npy(d + "/loss_ref.npy");
    ASSERT_EQ(loss_ref.size(), 1u);
    EXPECT_NEAR(losses[i], loss_ref[0], 1e-5 * std::abs(loss_ref[0]));
    std::vector<int64_t> shape;
    EXPECT_LT(rel_err(grads[i], read_npy(d + "/grad_ref.npy", &shape)), 1e-5);
  }
}

}  // namespace
}  // namespace seqtrain
