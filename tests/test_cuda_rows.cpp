// The CUDA backend's row-wise ops (cross-entropy, LayerNorm, embedding, dropout, the 1-D
// convolution's im2col / col2im columns, BatchNorm) against the reference backend, on odd shapes (no size a multiple of a warp or a block), ignored rows, the
// all-ignored batch, tied maxima, and the refusal of out-of-range targets / ids with the
// reference's own error text. Every test skips on a machine without a usable GPU.
//
// Tolerances. Cross-entropy's row sums run in double on the GPU as in the reference, so the loss
// sum is held to 1e-9 relative; lse is the double rounded to float (2e-6 of max(1, |lse|)); the
// gradient's probabilities are float expf (2e-6 of the tensor's scale, plus |lse| 6e-8 when
// taken from a saved float lse, as the CPU test argues). LayerNorm runs in float where the
// reference uses double: 5e-6 of each tensor's scale, 2e-5 for rows whose mean is 100 times
// their spread. The embedding and dropout do the same float operations in the same order as the
// reference (repeated ids summed in order of i), so they are compared bit for bit; so are the
// convolution's columns (copies, and col2im's gather sums its taps in the reference's order).
// BatchNorm sums each channel in double in another order than the reference's rows (a block's
// threads, then a tree): 1e-5 of the tensors' scale. Each op is
// also run twice and must give the same bits (no atomics in any sum).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/dropout_mask.h"
#include "core/rng.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

Backend& ref() { return backend_named("reference"); }


// ---- cross-entropy ---------------------------------------------------------------------------

struct CeData {
  int64_t rows, classes;
  std::vector<float> z;
  std::vector<int64_t> t;
};

// Random logits (N(0, spread^2)) and targets, a share of them ignored; row 0 has a tie at its max
// (target the second of the tied classes: not correct), row 1 a -inf logit (never its target).
CeData ce_data(int64_t rows, int64_t classes, float spread, double ignored, uint64_t seed) {
  Rng rng(seed);
  CeData d{rows, classes, randn(rng, rows * classes, spread), std::vector<int64_t>(rows)};
  for (auto& t : d.t)
    t = rng.uniform() < ignored ? -100 : std::min<int64_t>(classes - 1, static_cast<int64_t>(rng.uniform() * classes));
  if (rows > 2 && classes > 3) {
    d.z[0] = d.z[2] = 50.f;
    d.t[0] = 2;
    d.z[classes + 1] = -std::numeric_limits<float>::infinity();
    if (d.t[1] == 1) d.t[1] = 0;
  }
  return d;
}

CrossEntropyArgs ce_args(const CeData& d, const int64_t* targets, const float* logits, float* lse) {
  CrossEntropyArgs a;
  a.rows = d.rows;
  a.classes = d.classes;
  a.logits = logits;
  a.targets = targets;
  a.ignore_index = -100;
  a.lse = lse;
  return a;
}

struct CeResult {
  CrossEntropySum sum;
  std::vector<float> lse, grad, grad_from_lse;
};

// Forward (lse saved) and both backward forms on `be`; device copies when be is the GPU.
CeResult run_ce(Backend& be, const CeData& d, double scale) {
  DeviceArray<float> z(be, d.z), lse(be, std::vector<float>(d.rows, 0.f));
  DeviceArray<int64_t> t(be, d.t);
  DeviceArray<float> g(be, std::vector<float>(d.z.size(), 1.f)), g2(be, std::vector<float>(d.z.size(), 1.f));
  CeResult r;
  r.sum = be.cross_entropy_forward(ce_args(d, t.get(), z.get(), lse.get()));
  be.cross_entropy_backward(ce_args(d, t.get(), z.get(), nullptr), scale, g.get());
  be.cross_entropy_backward(ce_args(d, t.get(), z.get(), lse.get()), scale, g2.get());
  r.lse = lse.download();
  r.grad = g.download();
  r.grad_from_lse = g2.download();
  return r;
}

TEST(CudaRows, CrossEntropyMatchesTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  struct Case { int64_t rows, classes; float spread; double ignored; };
  for (const Case c : {Case{37, 29, 2.f, 0.2}, Case{1, 1, 1.f, 0}, Case{3, 5, 1.f, 0}, Case{129, 17, 8.f, 0.1},
                       Case{5, 1000, 1.f, 0}, Case{64, 85, 30.f, 0.05}, Case{7, 3001, 3.f, 0.3}}) {
    const CeData d = ce_data(c.rows, c.classes, c.spread, c.ignored, 7 + c.rows);
    const CeResult got = run_ce(gpu, d, 0.37), want = run_ce(ref(), d, 0.37);
    const std::string where = std::to_string(c.rows) + "x" + std::to_string(c.classes);
    EXPECT_EQ(got.sum.count, want.sum.count) << where;
    EXPECT_EQ(got.sum.correct, want.sum.correct) << where;
    EXPECT_NEAR(got.sum.loss, want.sum.loss, 1e-9 * std::max(1.0, std::fabs(want.sum.loss))) << where;
    float max_lse = 0.f;
    for (int64_t i = 0; i < d.rows; ++i) {
      if (d.t[i] == -100) {
        EXPECT_EQ(got.lse[i], 0.f) << where << ": an ignored row's lse is left as it was";
        continue;
      }
      ASSERT_NEAR(got.lse[i], want.lse[i], 2e-6 * std::max(1.f, std::fabs(want.lse[i]))) << where << " row " << i;
      max_lse = std::max(max_lse, std::fabs(want.lse[i]));
    }
    EXPECT_LT(scaled_err(got.grad, want.grad), 2e-6) << where;
    EXPECT_LT(scaled_err(got.grad_from_lse, want.grad), 2e-6 + max_lse * 6e-8) << where;
    for (int64_t i = 0; i < d.rows; ++i) {
      if (d.t[i] != -100) continue;
      for (int64_t j = 0; j < d.classes; ++j) ASSERT_EQ(got.grad[i * d.classes + j], 0.f) << where << " row " << i;
    }
    const CeResult again = run_ce(gpu, d, 0.37);
    EXPECT_EQ(again.sum.loss, got.sum.loss) << where << ": the loss sum must be deterministic";
    EXPECT_EQ(again.grad, got.grad) << where;
  }
}

TEST(CudaRows, CrossEntropyCountsTheFirstLargestLogitAsTheChoice) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const CeData d{2, 4, {1.f, 3.f, 3.f, 0.f, /**/ 2.f, 2.f, 1.f, 0.f}, {2, 0}};
  const CeResult r = run_ce(gpu, d, 1.0);
  EXPECT_EQ(r.sum.count, 2);
  EXPECT_EQ(r.sum.correct, 1) << "row 0 chose class 1, row 1 class 0";
}

TEST(CudaRows, CrossEntropyAllIgnoredIsZeroWithZeroGradient) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  CeData d = ce_data(9, 13, 1.f, 0, 3);
  std::fill(d.t.begin(), d.t.end(), -100);
  const CeResult r = run_ce(gpu, d, 1.0);
  EXPECT_EQ(r.sum.loss, 0.0);
  EXPECT_EQ(r.sum.count, 0);
  EXPECT_EQ(r.sum.correct, 0);
  for (float g : r.grad) ASSERT_EQ(g, 0.f);
}

// The GPU reads targets on the device; a bad one must still be the reference's error, word for
// word, from forward and from backward.
TEST(CudaRows, CrossEntropyRefusesBadTargetsWithTheReferenceMessage) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (int64_t bad : {int64_t{29}, int64_t{-1}, int64_t{1000}}) {
    CeData d = ce_data(37, 29, 1.f, 0.1, 5);
    d.t[11] = bad;
    d.t[30] = 29;  // a later bad row: the first one is named
    const std::string want = error_of([&] { ref().cross_entropy_forward(ce_args(d, d.t.data(), d.z.data(), nullptr)); });
    DeviceArray<float> z(gpu, d.z), g(gpu, d.z.size());
    DeviceArray<int64_t> t(gpu, d.t);
    EXPECT_EQ(error_of([&] { gpu.cross_entropy_forward(ce_args(d, t.get(), z.get(), nullptr)); }), want);
    EXPECT_EQ(error_of([&] { gpu.cross_entropy_backward(ce_args(d, t.get(), z.get(), nullptr), 1.0, g.get()); }),
              want);
    EXPECT_CONTAINS(want, "at row 11");
  }
}

// ---- LayerNorm -------------------------------------------------------------------------------

struct LnResult {
  std::vector<float> y, mean, rstd, dx, dw, db;
};

LnResult run_ln(Backend& be, int64_t rows, int64_t C, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy, const std::vector<float>& dw0,
                const std::vector<float>& db0, bool bias) {
  DeviceArray<float> dx_(be, x), w_(be, w), b_(be, b), dy_(be, dy), y(be, x.size()), mean(be, rows), rstd(be, rows),
      dx(be, x.size()), dw(be, dw0), db(be, db0);
  LayerNormArgs a;
  a.rows = rows;
  a.channels = C;
  a.eps = 1e-5f;
  a.x = dx_.get();
  a.weight = w_.get();
  a.bias = bias ? b_.get() : nullptr;
  a.mean = mean.get();
  a.rstd = rstd.get();
  be.layer_norm_forward(a, y.get());
  be.layer_norm_backward(a, dy_.get(), dx.get(), dw.get(), bias ? db.get() : nullptr);
  return {y.download(), mean.download(), rstd.download(), dx.download(), dw.download(), db.download()};
}

TEST(CudaRows, LayerNormMatchesTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  const int64_t shapes[][2] = {{37, 45}, {1, 1}, {3, 7}, {130, 257}, {65, 1031}, {200, 384}};
  for (const auto& s : shapes)
    for (const float mean : {0.f, 100.f})
      for (const bool bias : {true, false}) {
        const int64_t rows = s[0], C = s[1];
        Rng rng(rows * 31 + C);
        std::vector<float> x = randn(rng, rows * C), w = randn(rng, C), b = randn(rng, C), dy = randn(rng, rows * C),
                           dw0 = randn(rng, C), db0 = randn(rng, C);
        for (auto& v : x) v += mean;
        const LnResult got = run_ln(gpu, rows, C, x, w, b, dy, dw0, db0, bias);
        const LnResult want = run_ln(ref(), rows, C, x, w, b, dy, dw0, db0, bias);
        const double tol = mean == 0.f ? 5e-6 : 2e-5;
        const std::string where = std::to_string(rows) + "x" + std::to_string(C) + " mean " +
                                  std::to_string(mean) + (bias ? " bias" : " no bias");
        EXPECT_LT(scaled_err(got.y, want.y), tol) << where;
        EXPECT_LT(scaled_err(got.mean, want.mean), tol) << where;
        EXPECT_LT(scaled_err(got.rstd, want.rstd), tol) << where;
        // dx's scale is that of its terms, rstd |w dy|, not its own size: with C = 1 the exact dx is
        // 0 (x - mean is 0), and a fused multiply-add leaves rounding of that scale.
        double dx_scale = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < C; ++c)
            dx_scale = std::max(dx_scale, std::fabs(double(want.rstd[r]) * w[c] * dy[r * C + c]));
        EXPECT_LT(scaled_err(got.dx, want.dx, dx_scale), tol) << where;
        EXPECT_LT(scaled_err(got.dw, want.dw), tol) << where;
        if (bias) {
          EXPECT_LT(scaled_err(got.db, want.db), tol) << where;
        } else {
          EXPECT_EQ(got.db, db0) << where << ": no bias, dbias untouched";
        }
        const LnResult again = run_ln(gpu, rows, C, x, w, b, dy, dw0, db0, bias);
        EXPECT_EQ(again.dw, got.dw) << where << ": column sums must be deterministic";
        EXPECT_EQ(again.db, got.db) << where;
        EXPECT_EQ(again.dx, got.dx) << where;
      }
}

// The 16-bit outputs (runtime.precision bf16 / fp16: what a 16-bit Linear reads) are the fp32
// outputs narrowed by the backend's own conversion, bit for bit, with LayerNorm's saved
// statistics unchanged: the kernels compute in fp32 and round only as they store.
TEST(CudaRows, HalfOutputsAreTheFp32OutputsRounded) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  EXPECT_TRUE(gpu.supports(BackendOp::half_output));
  const auto narrowed = [&](const DeviceArray<float>& y32, DType to) {
    DeviceArray<uint16_t> bits(gpu, y32.size());
    gpu.convert(DType::f32, y32.get(), to, bits.get(), y32.size());
    return bits.download();
  };
  for (const DType to : {DType::bf16, DType::f16})
    for (const auto& s : {std::pair<int64_t, int64_t>{37, 45}, {200, 384}}) {
      const int64_t rows = s.first, C = s.second;
      Rng rng(rows + C);
      std::vector<float> x = randn(rng, rows * C), w = randn(rng, C), b = randn(rng, C);
      for (auto& v : x) v *= 30.f;  // past fp16's 65504 after the weights' scale: overflow rounds too
      DeviceArray<float> dx(gpu, x), dw(gpu, w), db(gpu, b), y32(gpu, rows * C), mean(gpu, rows), rstd(gpu, rows),
          mean16(gpu, rows), rstd16(gpu, rows);
      DeviceArray<uint16_t> y16(gpu, rows * C);
      LayerNormArgs a{.rows = rows, .channels = C, .x = dx.get(), .weight = dw.get(), .bias = db.get(),
                      .mean = mean.get(), .rstd = rstd.get()};
      gpu.layer_norm_forward(a, y32.get());
      a.mean = mean16.get();
      a.rstd = rstd16.get();
      gpu.layer_norm_forward_half(a, to, y16.get());
      const std::string where = std::to_string(rows) + "x" + std::to_string(C) + (to == DType::bf16 ? " bf16" : " f16");
      EXPECT_EQ(y16.download(), narrowed(y32, to)) << where;
      EXPECT_EQ(mean16.download(), mean.download()) << where;
      EXPECT_EQ(rstd16.download(), rstd.download()) << where;
    }
  Rng rng(5);
  std::vector<float> x = randn(rng, 4099);
  for (auto& v : x) v *= 4.f;
  DeviceArray<float> dx(gpu, x), y32(gpu, x.size());
  DeviceArray<uint16_t> y16(gpu, x.size());
  for (const DType to : {DType::bf16, DType::f16})
    for (const ActKind k : {ActKind::relu, ActKind::tanh, ActKind::sigmoid, ActKind::gelu, ActKind::gelu_tanh}) {
      gpu.activation_forward(k, dx.get(), y32.get(), static_cast<int64_t>(x.size()));
      gpu.activation_forward_half(k, dx.get(), to, y16.get(), static_cast<int64_t>(x.size()));
      EXPECT_EQ(y16.download(), narrowed(y32, to)) << "activation " << static_cast<int>(k);
    }
  EXPECT_CONTAINS(error_of([&] { gpu.activation_forward_half(ActKind::relu, dx.get(), DType::f32, y16.get(), 4); }),
                  "not a 16-bit type");
}

// ---- embedding -------------------------------------------------------------------------------

struct EmbData {
  int64_t rows, dim;
  std::vector<int64_t> ids;
  std::vector<float> table, dy, y0;
};

// Ids drawn from few rows so that most repeat (their gradients must sum in order of i).
EmbData emb_data(int64_t rows, int64_t dim, int64_t count, uint64_t seed) {
  Rng rng(seed);
  EmbData d{rows, dim, std::vector<int64_t>(count), randn(rng, rows * dim), randn(rng, count * dim),
            randn(rng, count * dim)};
  for (auto& id : d.ids) id = std::min<int64_t>(rows - 1, static_cast<int64_t>(rng.uniform() * rows));
  return d;
}

EmbeddingArgs emb_args(const EmbData& d, const int64_t* ids) {
  EmbeddingArgs a;
  a.rows = d.rows;
  a.dim = d.dim;
  a.count = static_cast<int64_t>(d.ids.size());
  a.ids = ids;
  return a;
}

struct EmbResult {
  std::vector<float> y, y_acc, dtable;
};
EmbResult run_emb(Backend& be, const EmbData& d) {
  DeviceArray<int64_t> ids(be, d.ids);
  DeviceArray<float> table(be, d.table), dy(be, d.dy), y(be, d.y0), y_acc(be, d.y0), dtable(be, d.table);
  const EmbeddingArgs a = emb_args(d, ids.get());
  be.embedding_forward(a, table.get(), y.get(), false);
  be.embedding_forward(a, table.get(), y_acc.get(), true);
  be.embedding_backward(a, dy.get(), dtable.get());
  return {y.download(), y_acc.download(), dtable.download()};
}

TEST(CudaRows, EmbeddingEqualsTheReferenceBitForBit) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  // Tables up to 1024 rows take the owned-cell kernel (a count past its 1024-id chunk too),
  // larger ones the lanes kernel.
  const int64_t shapes[][3] = {{29, 45, 70},    {1, 1, 5},     {7, 3, 1},      {50, 384, 600},
                               {1000, 129, 37}, {17, 200, 0},  {65, 384, 3000}, {1500, 17, 900}};
  for (const auto& s : shapes) {
    const EmbData d = emb_data(s[0], s[1], s[2], s[0] + s[1]);
    const EmbResult got = run_emb(gpu, d), want = run_emb(ref(), d);
    const std::string where = std::to_string(s[0]) + "x" + std::to_string(s[1]) + " count " + std::to_string(s[2]);
    EXPECT_EQ(got.y, want.y) << where;
    EXPECT_EQ(got.y_acc, want.y_acc) << where;
    EXPECT_EQ(got.dtable, want.dtable) << where << ": repeated ids must sum in order of i";
  }
}

TEST(CudaRows, EmbeddingRefusesAnIdOutOfRangeWithTheReferenceMessage) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (int64_t bad : {int64_t{29}, int64_t{-3}}) {
    EmbData d = emb_data(29, 45, 70, 1);
    d.ids[41] = bad;
    d.ids[60] = 100;  // a later bad position: the first one is named
    std::vector<float> y(d.y0);
    const std::string want =
        error_of([&] { ref().embedding_forward(emb_args(d, d.ids.data()), d.table.data(), y.data(), false); });
    EXPECT_CONTAINS(want, "at position 41");
    DeviceArray<int64_t> ids(gpu, d.ids);
    DeviceArray<float> table(gpu, d.table), dy(gpu, d.dy), out(gpu, d.y0), dtable(gpu, d.table);
    const EmbeddingArgs a = emb_args(d, ids.get());
    EXPECT_EQ(error_of([&] { gpu.embedding_forward(a, table.get(), out.get(), false); }), want);
    EXPECT_EQ(error_of([&] { gpu.embedding_forward(a, table.get(), out.get(), true); }), want);
    EXPECT_EQ(error_of([&] { gpu.embedding_backward(a, dy.get(), dtable.get()); }), want);
  }
}

// ---- dropout ---------------------------------------------------------------------------------

// The GPU draws dropout_mask.h's mask (the header's functions compiled for the device): the
// same bits as the host's dropout_keep, and as the reference backend.
TEST(CudaRows, DropoutIsTheMaskOfDropoutKeep) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (const int64_t n : {int64_t{37}, 3 * kDropoutBlock + 37, int64_t{0}}) {
    Rng rng(4);
    const std::vector<float> x = randn(rng, n);
    for (const float p : {0.f, 0.1f, 0.5f, 1.f}) {
      std::vector<float> want(n), want_ref(n, 9.f);
      for (int64_t i = 0; i < n; ++i) want[i] = dropout_keep(77, i, p) ? x[i] * dropout_scale(p) : 0.f;
      ref().dropout_forward(x.data(), want_ref.data(), n, p, 77);
      EXPECT_EQ(want_ref, want);
      DeviceArray<float> dx_in(gpu, x), y(gpu, std::vector<float>(n, 9.f)), dx(gpu, std::vector<float>(n, 9.f));
      gpu.dropout_forward(dx_in.get(), y.get(), n, p, 77);
      gpu.dropout_backward(dx_in.get(), dx.get(), n, p, 77);
      EXPECT_EQ(y.download(), want) << "n=" << n << " p=" << p;
      EXPECT_EQ(dx.download(), want) << "n=" << n << " p=" << p;
    }
  }
  EXPECT_CONTAINS(error_of([&] { gpu.dropout_forward(nullptr, nullptr, 4, 1.5f, 1); }), "[0, 1]");
}

// A data-parallel shard's dropout (Backend::dropout_at): element i keyed as element first + i of
// the mask, so a rank's rows draw what one process draws for them; the reference's bits.
TEST(CudaRows, DropoutAtKeysTheShardsGlobalIndex) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  Rng rng(5);
  const int64_t n = kDropoutBlock + 301;
  const std::vector<float> x = randn(rng, n);
  for (const int64_t first : {int64_t{0}, int64_t{7}, 2 * kDropoutBlock - 5}) {
    std::vector<float> want(n, 9.f);
    ref().dropout_at(x.data(), want.data(), n, 0.3f, 91, first);
    DeviceArray<float> in(gpu, x), y(gpu, std::vector<float>(n, 9.f));
    gpu.dropout_at(in.get(), y.get(), n, 0.3f, 91, first);
    EXPECT_EQ(y.download(), want) << "first=" << first;
  }
}

// ---- the convolution's columns ---------------------------------------------------------------

// im2col_1d's columns and col2im_1d's dx on `be` (device copies on the GPU), with and without a
// padding mask.
std::pair<std::vector<float>, std::vector<float>> run_columns(Backend& be, Conv1dArgs a, const std::vector<float>& x,
                                                              const std::vector<float>& dcols,
                                                              const std::vector<uint8_t>& mask) {
  DeviceArray<float> dx_in(be, x), cols(be, dcols.size()), dc(be, dcols), dx(be, x.size());
  DeviceArray<uint8_t> m(be, mask.empty() ? std::vector<uint8_t>(1, 0) : mask);
  a.mask = mask.empty() ? nullptr : m.get();
  be.im2col_1d(a, dx_in.get(), cols.get());
  be.col2im_1d(a, dc.get(), dx.get());
  return {cols.download(), dx.download()};
}

TEST(CudaRows, Conv1dColumnsMatchTheReferenceBitForBit) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  for (const int64_t k : {1, 2, 3, 8})
    for (const bool padded : {false, true}) {
      const Conv1dArgs a{.batch = 3, .steps = 37, .channels = 5, .kernel = k, .pad_left = (k - 1) / 2};
      Rng rng(static_cast<uint64_t>(k * 2 + padded));
      const std::vector<float> x = randn(rng, 3 * 37 * 5), dcols = randn(rng, 3 * 37 * 5 * k);
      std::vector<uint8_t> mask;
      if (padded) {
        mask.assign(3 * 37, 0);
        for (int64_t t = 20; t < 37; ++t) mask[37 + t] = 1;  // sample 1 has 20 steps
      }
      const auto got = run_columns(gpu, a, x, dcols, mask), want = run_columns(ref(), a, x, dcols, mask);
      EXPECT_EQ(got.first, want.first) << "im2col, k " << k << (padded ? " padded" : "");
      EXPECT_EQ(got.second, want.second) << "col2im, k " << k << (padded ? " padded" : "");
    }
}

// ---- BatchNorm ----------------------------------------------------------------------------------

// batch_norm_forward (training, then eval) and _backward on `be`: y, dx, dweight, dbias and the
// running statistics, all in one vector.
std::vector<float> run_batch_norm(Backend& be, bool training, const std::vector<float>& x, const std::vector<float>& dy,
                                  const std::vector<uint8_t>& mask, int64_t N, int64_t C, int64_t count) {
  Rng rng(7);
  const std::vector<float> w = randn(rng, C), b = randn(rng, C);
  DeviceArray<float> dx_in(be, x), ddy(be, dy), dw(be, w), db(be, b), y(be, x.size()), dx(be, x.size()),
      gw(be, std::vector<float>(C, 0.f)), gb(be, std::vector<float>(C, 0.f)), mean(be, static_cast<size_t>(C)), rstd(be, static_cast<size_t>(C)),
      rm(be, std::vector<float>(C, 0.2f)), rv(be, std::vector<float>(C, 1.5f)), nbt(be, std::vector<float>(1, 0.f));
  DeviceArray<uint8_t> m(be, mask.empty() ? std::vector<uint8_t>(1, 0) : mask);
  const BatchNormArgs a{.rows = N, .channels = C, .count = count, .training = training, .x = dx_in.get(),
                        .mask = mask.empty() ? nullptr : m.get(), .weight = dw.get(), .bias = db.get(),
                        .mean = mean.get(), .rstd = rstd.get(), .running_mean = rm.get(), .running_var = rv.get(),
                        .num_batches_tracked = nbt.get()};
  be.batch_norm_forward(a, y.get());
  be.batch_norm_backward(a, ddy.get(), dx.get(), gw.get(), gb.get());
  std::vector<float> out;
  for (DeviceArray<float>* t : {&y, &dx, &gw, &gb, &rm, &rv, &nbt}) {
    const std::vector<float> v = t->download();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// One block per channel with a fixed tree against the reference's row order: within float
// rounding, and the same every launch.
TEST(CudaRows, BatchNormMatchesTheReference) {
  SEQTRAIN_CUDA_OR_SKIP(gpu);
  constexpr int64_t N = 1037, C = 19;
  Rng rng(3);
  const std::vector<float> x = randn(rng, N * C, 2.f), dy = randn(rng, N * C);
  std::vector<uint8_t> mask(N, 0);
  int64_t count = N;
  for (int64_t i = 3; i < N; i += 5) mask[static_cast<size_t>(i)] = 1, --count;
  for (const bool padded : {false, true})
    for (const bool training : {true, false}) {
      const std::vector<uint8_t> m = padded ? mask : std::vector<uint8_t>{};
      const int64_t n = padded ? count : N;
      const std::vector<float> got = run_batch_norm(gpu, training, x, dy, m, N, C, n);
      EXPECT_LT(rel_err(got, run_batch_norm(ref(), training, x, dy, m, N, C, n)), 1e-5)
          << (padded ? "padded" : "full") << (training ? ", training" : ", eval");
      EXPECT_EQ(got, run_batch_norm(gpu, training, x, dy, m, N, C, n)) << "a second launch differs";
    }
}

}  // namespace
}  // namespace seqtrain::testing
