// The Backend's row-wise ops (backend.h): cross-entropy, LayerNorm, the embedding lookup and
// dropout. The CPU backend (per-ISA vector kernels, threads) against the reference backend
// (plain loops, sums in double) on random shapes, odd sizes included (not multiples of any
// vector width), ignore_index rows and the all-ignored batch; every ISA level this process can
// run against the plain one; 1 vs 2 threads; and the ops' refusals of bad arguments.
//
// Tolerances. Cross-entropy and LayerNorm run in float on the CPU (vec.h's exp: relative error
// below 2e-7; float row sums of at most a few hundred terms) where the reference uses double, so
// they are held to 2e-6 of each tensor's scale (1e-5 for LayerNorm rows whose mean is 100 times
// their spread: the float mean alone is 100 * 2^-24 off) and the loss sum to 1e-6 relative.
// Across ISA levels only summation order and FMA contraction differ: 1e-6. The embedding's
// gather and scatter-add and dropout do the same float operations in the same order on every
// backend, level and thread count, so those are compared bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/dropout_mask.h"
#include "core/rng.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

Backend& cpu() { return backend_named("cpu"); }
Backend& ref() { return backend_named("reference"); }

std::vector<Isa> runnable_levels() {
  std::vector<Isa> out;
  for (int i = 0; i <= static_cast<int>(active_isa()); ++i) out.push_back(static_cast<Isa>(i));
  return out;
}


// Runs f with n OpenMP threads, then restores the count.
template <class F>
auto with_threads(int n, F&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(n);
  auto r = f();
  omp_set_num_threads(saved);
  return r;
}

// ---- cross-entropy ---------------------------------------------------------------------------

struct CeCase {
  int64_t rows, classes;
  float spread;         // logits ~ N(0, spread^2)
  double ignored;       // share of rows whose target is ignore_index
};

struct CeData {
  std::vector<float> z;
  std::vector<int64_t> t;
  CrossEntropyArgs args(float* lse = nullptr) const {
    CrossEntropyArgs a;
    a.rows = static_cast<int64_t>(t.size());
    a.classes = static_cast<int64_t>(z.size() / t.size());
    a.logits = z.data();
    a.targets = t.data();
    a.ignore_index = -100;
    a.lse = lse;
    return a;
  }
};

// Random logits and targets; one row with a tie at its max, one with a -inf logit (a masked
// class), when there are rows and classes enough.
CeData ce_data(const CeCase& c, uint64_t seed) {
  Rng rng(seed);
  CeData d{randn(rng, c.rows * c.classes, c.spread), std::vector<int64_t>(c.rows)};
  for (auto& t : d.t)
    t = rng.uniform() < c.ignored ? -100 : std::min<int64_t>(c.classes - 1, static_cast<int64_t>(rng.uniform() * c.classes));
  if (c.rows > 2 && c.classes > 3) {
    float* r0 = d.z.data();
    r0[0] = r0[2] = 50.f;  // a tie: the first largest is class 0
    d.t[0] = 2;
    d.z[c.classes + 1] = -std::numeric_limits<float>::infinity();
    if (d.t[1] == 1) d.t[1] = 0;  // the masked class is never a target (its loss is inf)
  }
  return d;
}

struct CeResult {
  CrossEntropySum sum;
  std::vector<float> lse, grad, grad_from_lse;
};

CeResult run_ce(Backend& be, const CeData& d, double scale) {
  CeResult r;
  r.lse.assign(d.t.size(), 0.f);
  r.sum = be.cross_entropy_forward(d.args(r.lse.data()));
  r.grad.assign(d.z.size(), 1.f);
  r.grad_from_lse.assign(d.z.size(), 1.f);
  be.cross_entropy_backward(d.args(), scale, r.grad.data());
  be.cross_entropy_backward(d.args(r.lse.data()), scale, r.grad_from_lse.data());
  return r;
}

TEST(BackendOps, CrossEntropyCpuMatchesTheReference) {
  const CeCase cases[] = {{1, 1, 1.f, 0}, {3, 5, 1.f, 0}, {37, 65, 2.f, 0.2}, {129, 17, 8.f, 0.1},
                          {300, 203, 3.f, 0.3}, {5, 1000, 1.f, 0}, {64, 85, 30.f, 0.05}};
  for (const CeCase& c : cases) {
    const CeData d = ce_data(c, 7 + c.rows);
    const CeResult got = run_ce(cpu(), d, 0.37), want = run_ce(ref(), d, 0.37);
    const std::string where = std::to_string(c.rows) + "x" + std::to_string(c.classes);
    EXPECT_EQ(got.sum.count, want.sum.count) << where;
    EXPECT_EQ(got.sum.correct, want.sum.correct) << where;
    EXPECT_NEAR(got.sum.loss, want.sum.loss, 1e-6 * std::max(1.0, std::fabs(want.sum.loss))) << where;
    for (size_t i = 0; i < d.t.size(); ++i) {
      if (d.t[i] == -100) continue;
      ASSERT_NEAR(got.lse[i], want.lse[i], 2e-6 * std::max(1.f, std::fabs(want.lse[i]))) << where;
    }
    EXPECT_LT(scaled_err(got.grad, want.grad), 2e-6) << where;
    // From a saved lse the probabilities carry its float rounding, |lse| 2^-24 relative.
    const float max_lse = std::fabs(*std::max_element(want.lse.begin(), want.lse.end(),
                                                      [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    EXPECT_LT(scaled_err(got.grad_from_lse, want.grad), 2e-6 + max_lse * 6e-8) << where;
    for (size_t i = 0; i < d.t.size(); ++i) {  // ignored rows: exact zeros
      if (d.t[i] != -100) continue;
      for (int64_t j = 0; j < c.classes; ++j) ASSERT_EQ(got.grad[i * c.classes + j], 0.f) << where;
    }
  }
}

TEST(BackendOps, CrossEntropyCountsTheFirstLargestLogitAsTheChoice) {
  const CeData d{{1.f, 3.f, 3.f, 0.f, /**/ 2.f, 2.f, 1.f, 0.f}, {2, 0}};
  for (Backend* be : {&cpu(), &ref()}) {
    const CrossEntropySum s = be->cross_entropy_forward(d.args());
    EXPECT_EQ(s.count, 2);
    EXPECT_EQ(s.correct, 1) << be->name() << ": row 0 chose class 1, row 1 class 0";
  }
}

TEST(BackendOps, CrossEntropyAllIgnoredIsZeroWithZeroGradient) {
  CeData d = ce_data({9, 13, 1.f, 0}, 3);
  std::fill(d.t.begin(), d.t.end(), -100);
  for (Backend* be : {&cpu(), &ref()}) {
    const CeResult r = run_ce(*be, d, 1.0);
    EXPECT_EQ(r.sum.loss, 0.0) << be->name();
    EXPECT_EQ(r.sum.count, 0) << be->name();
    EXPECT_EQ(r.sum.correct, 0) << be->name();
    for (float g : r.grad) ASSERT_EQ(g, 0.f) << be->name();
  }
}

TEST(BackendOps, CrossEntropyEveryLevelAndThreadCountAgree) {
  const CeData d = ce_data({300, 211, 3.f, 0.1}, 11);  // 63300 logits: the threaded path
  auto run = [&](Isa isa) {
    std::vector<CrossEntropyTotals> blocks(300);
    std::vector<float> grad(d.z.size());
    CrossEntropyKernelArgs k;
    k.rows = 300; k.C = 211; k.logits = d.z.data(); k.targets = d.t.data(); k.blocks = blocks.data();
    k.dlogits = grad.data(); k.scale = 0.5f;
    const CrossEntropyTotals t = cpu_kernels(isa).cross_entropy_forward(k);
    cpu_kernels(isa).cross_entropy_backward(k);
    return std::make_pair(t, grad);
  };
  const auto plain = run(Isa::plain);
  for (Isa isa : runnable_levels()) {
    const auto got = run(isa);
    EXPECT_NEAR(got.first.loss, plain.first.loss, 1e-6 * plain.first.loss) << isa_name(isa);
    EXPECT_EQ(got.first.correct, plain.first.correct) << isa_name(isa);
    EXPECT_LT(scaled_err(got.second, plain.second), 1e-6) << isa_name(isa);
  }
  const auto one = with_threads(1, [&] { return run(active_isa()); });
  const auto two = with_threads(2, [&] { return run(active_isa()); });
  EXPECT_EQ(one.first.loss, two.first.loss) << "the loss sum depends on the thread count";
  EXPECT_EQ(one.second, two.second);
}

TEST(BackendOps, CrossEntropyRefusesBadTargetsNamingThem) {
  CeData d = ce_data({4, 6, 1.f, 0}, 5);
  d.t[2] = 6;
  for (Backend* be : {&cpu(), &ref()}) {
    const std::string e = error_of([&] { be->cross_entropy_forward(d.args()); });
    EXPECT_CONTAINS(e, "target 6 at row 2");
    EXPECT_CONTAINS(e, "6 classes");
  }
}

// ---- LayerNorm -------------------------------------------------------------------------------

struct LnData {
  int64_t rows, C;
  std::vector<float> x, w, b, dy, dw0, db0;
  LayerNormArgs args(float* mean, float* rstd, bool bias) const {
    LayerNormArgs a;
    a.rows = rows; a.channels = C; a.eps = 1e-5f;
    a.x = x.data(); a.weight = w.data(); a.bias = bias ? b.data() : nullptr;
    a.mean = mean; a.rstd = rstd;
    return a;
  }
};

LnData ln_data(int64_t rows, int64_t C, float mean, uint64_t seed) {
  Rng rng(seed);
  LnData d{rows, C, randn(rng, rows * C), randn(rng, C), randn(rng, C), randn(rng, rows * C), randn(rng, C),
           randn(rng, C)};
  for (auto& v : d.x) v += mean;
  return d;
}

struct LnResult {
  std::vector<float> y, mean, rstd, dx, dw, db;
};

LnResult run_ln(Backend& be, const LnData& d, bool bias) {
  LnResult r{std::vector<float>(d.x.size()), std::vector<float>(d.rows), std::vector<float>(d.rows),
             std::vector<float>(d.x.size()), d.dw0, d.db0};
  const LayerNormArgs a = d.args(r.mean.data(), r.rstd.data(), bias);
  be.layer_norm_forward(a, r.y.data());
  be.layer_norm_backward(a, d.dy.data(), r.dx.data(), r.dw.data(), bias ? r.db.data() : nullptr);
  return r;
}

TEST(BackendOps, LayerNormCpuMatchesTheReference) {
  const int64_t shapes[][2] = {{1, 1}, {3, 7}, {17, 33}, {64, 128}, {100, 257}, {300, 130}};
  for (const auto& s : shapes)
    for (float mean : {0.f, 3.f, 100.f})
      for (bool bias : {true, false}) {
        const LnData d = ln_data(s[0], s[1], mean, 3 + s[0]);
        const LnResult got = run_ln(cpu(), d, bias), want = run_ln(ref(), d, bias);
        const double tol = mean >= 100.f ? 1e-5 : 2e-6;
        const std::string where = std::to_string(s[0]) + "x" + std::to_string(s[1]) + " mean " +
                                  std::to_string(mean) + (bias ? " bias" : "");
        EXPECT_LT(scaled_err(got.y, want.y), tol) << where;
        EXPECT_LT(scaled_err(got.mean, want.mean), 1e-6) << where;
        EXPECT_LT(scaled_err(got.rstd, want.rstd), tol) << where;
        // A 1-wide row's dx is exactly 0; in float it is the rounding residue of dy w - mean(dy w)
        // times rstd = 1/sqrt(eps), ~1e-5: only the larger rows are compared.
        if (s[1] > 1) {
          EXPECT_LT(scaled_err(got.dx, want.dx), tol) << where;
        }
        EXPECT_LT(scaled_err(got.dw, want.dw), tol) << where;
        if (bias) {
          EXPECT_LT(scaled_err(got.db, want.db), 2e-6) << where;
        } else {
          EXPECT_EQ(got.db, d.db0) << where;
        }
      }
}

TEST(BackendOps, LayerNormEveryLevelAndThreadCountAgree) {
  const LnData d = ln_data(301, 129, 2.f, 9);  // 38829 elements: the threaded path
  auto run = [&](Isa isa) {
    LnResult r{std::vector<float>(d.x.size()), std::vector<float>(d.rows), std::vector<float>(d.rows),
               std::vector<float>(d.x.size()), d.dw0, d.db0};
    std::vector<float> partials((d.rows / kLayerNormBlockRows + 1) * 2 * d.C);
    LayerNormKernelArgs k;
    k.rows = d.rows; k.C = d.C; k.x = d.x.data(); k.weight = d.w.data(); k.bias = d.b.data();
    k.mean = r.mean.data(); k.rstd = r.rstd.data(); k.y = r.y.data();
    k.dy = d.dy.data(); k.dx = r.dx.data(); k.dweight = r.dw.data(); k.dbias = r.db.data();
    k.partials = partials.data();
    cpu_kernels(isa).layer_norm_forward(k);
    cpu_kernels(isa).layer_norm_backward(k);
    return r;
  };
  const LnResult plain = run(Isa::plain);
  for (Isa isa : runnable_levels()) {
    const LnResult got = run(isa);
    EXPECT_LT(scaled_err(got.y, plain.y), 1e-6) << isa_name(isa);
    EXPECT_LT(scaled_err(got.dx, plain.dx), 1e-6) << isa_name(isa);
    EXPECT_LT(scaled_err(got.dw, plain.dw), 1e-6) << isa_name(isa);
    EXPECT_LT(scaled_err(got.db, plain.db), 1e-6) << isa_name(isa);
  }
  const LnResult one = with_threads(1, [&] { return run(active_isa()); });
  const LnResult two = with_threads(2, [&] { return run(active_isa()); });
  EXPECT_EQ(one.y, two.y);
  EXPECT_EQ(one.dx, two.dx);
  EXPECT_EQ(one.dw, two.dw) << "dweight's sums depend on the thread count";
  EXPECT_EQ(one.db, two.db);
}

TEST(BackendOps, LayerNormRefusesBadArguments) {
  const LnData d = ln_data(2, 3, 0.f, 1);
  std::vector<float> m(2), r(2), y(6);
  for (Backend* be : {&cpu(), &ref()}) {
    LayerNormArgs a = d.args(m.data(), r.data(), true);
    a.channels = 0;
    EXPECT_CONTAINS(error_of([&] { be->layer_norm_forward(a, y.data()); }), "must be positive");
    a = d.args(nullptr, r.data(), true);
    EXPECT_CONTAINS(error_of([&] { be->layer_norm_forward(a, y.data()); }), "null pointer");
  }
}

// ---- embedding -------------------------------------------------------------------------------

struct EmbData {
  int64_t rows, dim;
  std::vector<float> table, y0, dy, dtable0;
  std::vector<int64_t> ids;
  EmbeddingArgs args() const { return {rows, dim, static_cast<int64_t>(ids.size()), ids.data()}; }
};

// Ids drawn from a few rows so that most repeat (as positions and common characters do).
EmbData emb_data(int64_t rows, int64_t dim, int64_t count, uint64_t seed) {
  Rng rng(seed);
  EmbData d{rows, dim, randn(rng, rows * dim), randn(rng, count * dim), randn(rng, count * dim),
            randn(rng, rows * dim), std::vector<int64_t>(count)};
  for (auto& id : d.ids) id = std::min<int64_t>(rows - 1, static_cast<int64_t>(rng.uniform() * rows));
  return d;
}

// forward (overwrite), forward (accumulate onto y0), backward onto dtable0: one vector.
std::vector<float> run_emb(Backend& be, const EmbData& d) {
  std::vector<float> y(d.y0.size()), acc = d.y0, dt = d.dtable0;
  be.embedding_forward(d.args(), d.table.data(), y.data(), false);
  be.embedding_forward(d.args(), d.table.data(), acc.data(), true);
  be.embedding_backward(d.args(), d.dy.data(), dt.data());
  y.insert(y.end(), acc.begin(), acc.end());
  y.insert(y.end(), dt.begin(), dt.end());
  return y;
}

TEST(BackendOps, EmbeddingCpuEqualsTheReferenceBitForBit) {
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 7}, {11, 17, 40}, {65, 128, 768}, {9, 130, 500}, {3, 1, 0}};
  for (const auto& s : shapes) {
    const EmbData d = emb_data(s[0], s[1], s[2], 5 + s[1]);
    EXPECT_EQ(run_emb(cpu(), d), run_emb(ref(), d)) << s[0] << "x" << s[1] << " count " << s[2];
  }
}

TEST(BackendOps, EmbeddingBackwardIsTheSameForEveryLevelAndThreadCount) {
  const EmbData d = emb_data(7, 133, 600, 3);  // 79800 elements, every id repeated ~85 times
  auto run = [&](Isa isa) {
    std::vector<float> dt = d.dtable0;
    EmbeddingKernelArgs k;
    k.dim = d.dim; k.count = static_cast<int64_t>(d.ids.size()); k.ids = d.ids.data();
    k.src = d.dy.data(); k.dst = dt.data();
    cpu_kernels(isa).embedding_backward(k);
    return dt;
  };
  const std::vector<float> want = run(Isa::plain);
  EXPECT_NE(want, d.dtable0);
  for (Isa isa : runnable_levels()) EXPECT_EQ(run(isa), want) << isa_name(isa);
  for (int threads : {1, 2, 3}) EXPECT_EQ(with_threads(threads, [&] { return run(active_isa()); }), want) << threads;
}

TEST(BackendOps, EmbeddingRefusesAnIdOutOfRange) {
  EmbData d = emb_data(10, 3, 4, 1);
  d.ids[3] = 10;
  std::vector<float> y(12);
  for (Backend* be : {&cpu(), &ref()}) {
    const std::string e = error_of([&] { be->embedding_forward(d.args(), d.table.data(), y.data(), false); });
    EXPECT_CONTAINS(e, "id 10 at position 3");
    EXPECT_CONTAINS(e, "vocabulary of 10");
    EXPECT_THROW(be->embedding_backward(d.args(), d.dy.data(), y.data()), Error);
  }
}

// ---- dropout ---------------------------------------------------------------------------------

TEST(BackendOps, DropoutIsTheMaskOfDropoutKeepOnEveryBackendLevelAndThreadCount) {
  const int64_t n = 3 * kDropoutBlock + 37;  // blocks and an odd tail
  Rng rng(4);
  const std::vector<float> x = randn(rng, n);
  for (float p : {0.f, 0.1f, 0.5f, 1.f}) {
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = dropout_keep(77, i, p) ? x[i] * dropout_scale(p) : 0.f;
    for (Backend* be : {&cpu(), &ref()}) {
      std::vector<float> y(n, 9.f), dx(n, 9.f);
      be->dropout_forward(x.data(), y.data(), n, p, 77);
      be->dropout_backward(x.data(), dx.data(), n, p, 77);
      EXPECT_EQ(y, want) << be->name() << " p=" << p;
      EXPECT_EQ(dx, want) << be->name() << " p=" << p;
    }
    for (Isa isa : runnable_levels())
      for (int threads : {1, 2}) {
        std::vector<float> y(n, 9.f);
        DropoutKernelArgs k{x.data(), y.data(), n, attention_keep_threshold(p), dropout_scale(p), 77};
        with_threads(threads, [&] { cpu_kernels(isa).dropout(k); return 0; });
        EXPECT_EQ(y, want) << isa_name(isa) << " threads " << threads << " p=" << p;
      }
  }
}

TEST(BackendOps, DropoutKeepsOneMinusPAndSeedsDiffer) {
  const int64_t n = 200000;
  const float p = 0.3f;
  int64_t kept = 0, same = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += dropout_keep(5, i, p);
    same += dropout_keep(5, i, p) == dropout_keep(6, i, p);
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 5 * std::sqrt(p * (1 - p) / n));
  EXPECT_NEAR(static_cast<double>(same) / n, p * p + (1 - p) * (1 - p), 0.01) << "seeds 5 and 6 correlate";
  std::vector<float> y(4);
  EXPECT_CONTAINS(error_of([&] { cpu().dropout_forward(y.data(), y.data(), 4, 1.5f, 1); }), "[0, 1]");
  EXPECT_CONTAINS(error_of([&] { ref().dropout_forward(y.data(), y.data(), 4, -0.5f, 1); }), "[0, 1]");
}

// ---- the activation ops (axpy, transpose, regression losses, token ids): plain float copies and
// float arithmetic in the same order on both backends, so bit for bit; the loss sums are the same
// serial double sums ----

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

TEST(BackendOps, AxpyAndTransposeCpuEqualTheReferenceBitForBit) {
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{70001}}) {
    const std::vector<float> x = random_floats(n, 1), y0 = random_floats(n, 2);
    std::vector<float> a = y0, b = y0;
    cpu().axpy(0.37f, x.data(), a.data(), a.size());
    ref().axpy(0.37f, x.data(), b.data(), b.size());
    EXPECT_EQ(a, b) << n;
    std::vector<float> sum = y0;
    cpu().axpy(1.f, x.data(), sum.data(), sum.size());
    for (size_t i = 0; i < sum.size(); ++i) ASSERT_EQ(sum[i], y0[i] + x[i]);  // alpha 1: exactly y + x
  }
  for (auto [A, B, C] : {std::tuple<int64_t, int64_t, int64_t>{3, 5, 7}, {1, 4, 2}, {40, 33, 65}}) {
    const std::vector<float> x = random_floats(A * B * C, 3);
    std::vector<float> a(x.size()), b(x.size());
    cpu().transpose(x.data(), a.data(), A, B, C);
    ref().transpose(x.data(), b.data(), A, B, C);
    EXPECT_EQ(a, b);
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < B; ++j)
        for (int64_t c = 0; c < C; ++c) ASSERT_EQ(a[(j * A + i) * C + c], x[(i * B + j) * C + c]);
  }
}

TEST(BackendOps, RegressionLossesCpuEqualTheReferenceAndTheFormulas) {
  const int64_t n = 1001;
  const std::vector<float> p = random_floats(n, 4), y = random_floats(n, 5);
  for (RegressionLoss kind : {RegressionLoss::mse, RegressionLoss::mae, RegressionLoss::huber}) {
    const double sc = cpu().regression_loss_forward(kind, p.data(), y.data(), n, 0.5f);
    EXPECT_EQ(sc, ref().regression_loss_forward(kind, p.data(), y.data(), n, 0.5f));
    double want = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(p[i]) - y[i], a = std::abs(d);
      want += kind == RegressionLoss::mse ? d * d : kind == RegressionLoss::mae ? a : (a < 0.5 ? 0.5 * a * a : 0.5 * (a - 0.25));
    }
    EXPECT_NEAR(sc, want, 1e-9 * std::abs(want));
    std::vector<float> ga(n), gb(n);
    cpu().regression_loss_backward(kind, p.data(), y.data(), n, 0.5f, 0.25f, ga.data());
    ref().regression_loss_backward(kind, p.data(), y.data(), n, 0.5f, 0.25f, gb.data());
    EXPECT_EQ(ga, gb);
    const float d0 = p[0] - y[0];
    const float g0 = kind == RegressionLoss::mse ? 2.f * 0.25f * d0
                     : kind == RegressionLoss::mae ? (d0 > 0 ? 0.25f : -0.25f)
                                                   : 0.25f * std::clamp(d0, -0.5f, 0.5f);
    EXPECT_EQ(ga[0], g0);
  }
}

TEST(BackendOps, TokenIdsConvertWholeNumbersAndNameTheFirstBadOne) {
  for (Backend* be : {&cpu(), &ref()}) {
    std::vector<float> f = {0.f, 3.f, 6.f, 2.f};
    std::vector<int64_t> ids(4, -7);
    EXPECT_EQ(be->token_ids(DType::f32, f.data(), ids.data(), 4, 7), -1);
    EXPECT_EQ(ids, (std::vector<int64_t>{0, 3, 6, 2}));
    f[2] = 1.5f;
    EXPECT_EQ(be->token_ids(DType::f32, f.data(), ids.data(), 4, 7), 2);
    f[1] = 7.f;
    EXPECT_EQ(be->token_ids(DType::f32, f.data(), ids.data(), 4, 7), 1);
    std::vector<int64_t> i64 = {1, 2, -1};
    EXPECT_EQ(be->token_ids(DType::i64, i64.data(), ids.data(), 3, 7), 2);
    for (BackendOp op : {BackendOp::axpy, BackendOp::transpose, BackendOp::regression_loss, BackendOp::token_ids})
      EXPECT_TRUE(be->supports(op)) << backend_op_name(op);
  }
}

}  // namespace
}  // namespace seqtrain::testing
