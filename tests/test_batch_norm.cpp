// nn/batch_norm.h (model.norm batch's layer) and the ParamStore buffers it keeps its running
// statistics in:
// - against torch's nn.BatchNorm1d in float64 (tests/py/layers_ref.py batch_norm) over three
//   training steps, with and without padding (torch on the valid steps gathered): each step's
//   output, dx, dweight and dbias, then the running statistics and num_batches_tracked, then the
//   eval-mode output and dx, within 1e-5;
// - its gradients against central differences of a double BatchNorm written here, in both modes,
//   and what sits at padded steps changes nothing, bit for bit;
// - the CPU backend's batch_norm op against the reference backend's, bit for bit (threads on);
// - a frozen BatchNorm runs on its running statistics and changes none of them;
// - buffers stay frozen and undecayed whatever groups, unfreezing or the decay policy say, and
//   count as no parameter in the summary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "models/registry.h"
#include "models/summary.h"
#include "nn/batch_norm.h"
#include "optim/param_groups.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

std::vector<float> entry_values(ParamStore& ps, size_t i, bool grad = false) {
  const Tensor t = grad ? ps.grad(i) : ps.param(i);
  return values(t);
}

std::vector<uint8_t> host_mask(const std::vector<int64_t>& lengths, int64_t T) {
  std::vector<uint8_t> m(lengths.size() * static_cast<size_t>(T), 0);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t t = lengths[b]; t < T; ++t) m[b * static_cast<size_t>(T) + static_cast<size_t>(t)] = 1;
  return m;
}

int64_t valid_count(const std::vector<int64_t>& lengths, int64_t B, int64_t T) {
  if (lengths.empty()) return B * T;
  int64_t n = 0;
  for (int64_t l : lengths) n += l;
  return n;
}

// A BatchNorm over C channels with its weight, bias and running statistics away from their init.
struct Layer {
  ParamStore ps;
  BatchNorm bn;
  explicit Layer(int64_t C, uint64_t seed) : bn(ps, "bn", C) {
    ps.finalize();
    bn.init();
    Rng rng(seed);
    for (int64_t c = 0; c < C; ++c) {
      ps.param(bn.weight).f32()[c] = 1.f + 0.3f * rng.normal();
      ps.param(bn.bias).f32()[c] = 0.3f * rng.normal();
      ps.param(bn.running_mean).f32()[c] = 0.5f * rng.normal();
      ps.param(bn.running_var).f32()[c] = 0.5f + rng.uniform(0.f, 1.f);
    }
  }
};

struct Pass {
  std::vector<float> y, dx;
};

Pass run_bn(Layer& l, const std::vector<float>& x, const std::vector<float>& dy, int64_t B, int64_t T,
            const std::vector<int64_t>& lengths, bool training) {
  const int64_t C = l.bn.channels;
  const std::vector<uint8_t> mask = host_mask(lengths, T);
  Arena arena;
  l.ps.zero_grad();
  std::vector<float> xc = x, dyc = dy;
  Pass p;
  p.y = values(l.bn.forward(Tensor(xc.data(), {B, T, C}), lengths.empty() ? nullptr : mask.data(),
                            valid_count(lengths, B, T), training, arena));
  p.dx = values(l.bn.backward(Tensor(dyc.data(), {B, T, C}), arena));
  return p;
}

class BatchNormTorch : public ::testing::TestWithParam<bool> {};

TEST_P(BatchNormTorch, ThreeTrainingStepsAndEvalMatchTorch) {
  SEQTRAIN_REQUIRE_TORCH();
  const bool padded = GetParam();
  constexpr int64_t S = 3, B = 3, T = 7, C = 5;
  Layer l(C, padded ? 11 : 12);
  const std::vector<int64_t> lengths = padded ? std::vector<int64_t>{7, 4, 2} : std::vector<int64_t>{};
  Rng rng(13);
  std::vector<float> xs = randn(rng, S * B * T * C, 2.f), dys = randn(rng, S * B * T * C);
  for (float& v : xs) v += 0.7f;  // a mean away from 0
  TempDir dir;
  write_npy(dir / "xs.npy", xs, {S, B, T, C});
  write_npy(dir / "dys.npy", dys, {S, B, T, C});
  for (const auto& [name, i] : {std::pair{"weight", l.bn.weight}, std::pair{"bias", l.bn.bias},
                                std::pair{"running_mean", l.bn.running_mean}, std::pair{"running_var", l.bn.running_var}})
    write_npy(dir / (std::string(name) + ".npy"), entry_values(l.ps, i), {C});
  if (padded) write_npy(dir / "lengths.npy", lengths, {B});
  ASSERT_EQ(run_python("layers_ref.py", "batch_norm " + dir.path.string()), 0);
  const size_t n = static_cast<size_t>(B * T * C);
  for (int64_t s = 0; s < S; ++s) {
    const std::vector<float> x(xs.begin() + s * n, xs.begin() + (s + 1) * n), dy(dys.begin() + s * n, dys.begin() + (s + 1) * n);
    const Pass p = run_bn(l, x, dy, B, T, lengths, true);
    const std::string k = std::to_string(s);
    EXPECT_LT(rel_err(p.y, read_npy(dir / ("y" + k + "_ref.npy"))), 1e-5) << "y, step " << s;
    EXPECT_LT(rel_err(p.dx, read_npy(dir / ("dx" + k + "_ref.npy"))), 1e-5) << "dx, step " << s;
    EXPECT_LT(rel_err(entry_values(l.ps, l.bn.weight, true), read_npy(dir / ("dweight" + k + "_ref.npy"))), 1e-5)
        << "dweight, step " << s;
    EXPECT_LT(rel_err(entry_values(l.ps, l.bn.bias, true), read_npy(dir / ("dbias" + k + "_ref.npy"))), 1e-5)
        << "dbias, step " << s;
  }
  EXPECT_LT(rel_err(entry_values(l.ps, l.bn.running_mean), read_npy(dir / "running_mean_ref.npy")), 1e-6);
  EXPECT_LT(rel_err(entry_values(l.ps, l.bn.running_var), read_npy(dir / "running_var_ref.npy")), 1e-6);
  EXPECT_EQ(entry_values(l.ps, l.bn.num_batches_tracked), (std::vector<float>{3.f}));
  EXPECT_EQ(read_npy(dir / "num_batches_tracked_ref.npy"), (std::vector<double>{3.0}));
  const std::vector<float> x0(xs.begin(), xs.begin() + n), dy0(dys.begin(), dys.begin() + n);
  const std::vector<float> stats(l.ps.params(), l.ps.params() + l.ps.size());
  const Pass e = run_bn(l, x0, dy0, B, T, lengths, false);
  EXPECT_LT(rel_err(e.y, read_npy(dir / "y_eval_ref.npy")), 1e-5) << "eval y";
  EXPECT_LT(rel_err(e.dx, read_npy(dir / "dx_eval_ref.npy")), 1e-5) << "eval dx";
  EXPECT_EQ(std::vector<float>(l.ps.params(), l.ps.params() + l.ps.size()), stats) << "eval mode moved a statistic";
}

INSTANTIATE_TEST_SUITE_P(BatchNorm, BatchNormTorch, ::testing::Values(false, true),
                         [](const auto& i) { return std::string(i.param ? "padded" : "full"); });

// sum of y * r for BatchNorm written out in double over the valid rows of x [N, C] (training:
// the batch's biased statistics; eval: the given running ones).
double bn_loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
               const std::vector<float>& r, const std::vector<uint8_t>& mask, int64_t N, int64_t C, bool training,
               const std::vector<float>& rm, const std::vector<float>& rv) {
  double loss = 0;
  for (int64_t c = 0; c < C; ++c) {
    double mean = rm[c], var = rv[c];
    if (training) {
      double s = 0, n = 0;
      for (int64_t i = 0; i < N; ++i)
        if (!mask[i]) s += x[i * C + c], n += 1;
      mean = s / n;
      double q = 0;
      for (int64_t i = 0; i < N; ++i)
        if (!mask[i]) q += (x[i * C + c] - mean) * (x[i * C + c] - mean);
      var = q / n;
    }
    for (int64_t i = 0; i < N; ++i)
      if (!mask[i]) loss += ((x[i * C + c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c]) * r[i * C + c];
  }
  return loss;
}

// (And the padded steps' values change nothing.)
TEST(BatchNormGradients, MatchCentralDifferencesOfADoubleBatchNorm) {
  for (const bool training : {true, false}) {
    constexpr int64_t B = 2, T = 6, C = 3;
    Layer l(C, 21);
    Rng rng(22);
    const std::vector<int64_t> lengths{6, 3};
    const std::vector<float> x = randn(rng, B * T * C), r = randn(rng, B * T * C);
    const std::vector<float> rm = entry_values(l.ps, l.bn.running_mean), rv = entry_values(l.ps, l.bn.running_var);
    const Pass p = run_bn(l, x, r, B, T, lengths, training);
    std::vector<double> xd(x.begin(), x.end());
    std::vector<double> w(l.ps.param(l.bn.weight).f32(), l.ps.param(l.bn.weight).f32() + C);
    std::vector<double> b(l.ps.param(l.bn.bias).f32(), l.ps.param(l.bn.bias).f32() + C);
    const std::vector<uint8_t> mask = host_mask(lengths, T);
    auto f = [&] { return bn_loss(xd, w, b, r, mask, B * T, C, training, rm, rv); };
    const char* mode = training ? "training" : "eval";
    EXPECT_LT(rel_err(p.dx, numgrad(xd, f)), 1e-5) << "dx, " << mode;
    EXPECT_LT(rel_err(entry_values(l.ps, l.bn.weight, true), numgrad(w, f)), 1e-5) << "dweight, " << mode;
    EXPECT_LT(rel_err(entry_values(l.ps, l.bn.bias, true), numgrad(b, f)), 1e-5) << "dbias, " << mode;
    for (int64_t t = 3; t < T; ++t)  // sample 1's padded steps: no gradient, and y 0
      for (int64_t c = 0; c < C; ++c) {
        EXPECT_EQ(p.dx[static_cast<size_t>((T + t) * C + c)], 0.f) << t;
        EXPECT_EQ(p.y[static_cast<size_t>((T + t) * C + c)], 0.f) << t;
      }
    // What sits at the padded steps reaches nothing (not the batch statistics either), bit for bit.
    const std::vector<float> g(l.ps.grads(), l.ps.grads() + l.ps.size());
    std::vector<float> x2 = x;
    for (int64_t t = 3; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) x2[static_cast<size_t>((T + t) * C + c)] = 100.f * rng.normal();
    for (size_t i : {l.bn.running_mean, l.bn.running_var}) std::memcpy(l.ps.param(i).f32(), (i == l.bn.running_mean ? rm : rv).data(), C * sizeof(float));
    const Pass p2 = run_bn(l, x2, r, B, T, lengths, training);
    EXPECT_EQ(p2.y, p.y) << mode;
    EXPECT_EQ(p2.dx, p.dx) << mode;
    EXPECT_EQ(std::vector<float>(l.ps.grads(), l.ps.grads() + l.ps.size()), g) << mode;
  }
}

// The CPU backend's op (OpenMP over channel blocks and rows) is the reference backend's, bit for
// bit: both run seam_loops.cpp's sums in one order.
TEST(BatchNormOps, CpuMatchesTheReferenceBitForBit) {
  constexpr int64_t N = 3000, C = 37;  // large enough for the CPU's threads, C no multiple of the blocks
  Rng rng(31);
  const std::vector<float> x = randn(rng, N * C, 3.f), dy = randn(rng, N * C), w = randn(rng, C), b = randn(rng, C);
  std::vector<uint8_t> mask(N, 0);
  for (int64_t i = 0; i < N; i += 7) mask[static_cast<size_t>(i)] = 1;
  int64_t count = 0;
  for (uint8_t m : mask) count += m ? 0 : 1;
  for (const bool masked : {false, true})
    for (const bool training : {true, false}) {
      struct Out {
        std::vector<float> y, dx, dw, db, mean, rstd, rm, rv, nbt;
      } out[2];
      Backend* backends[2] = {&backend_named("cpu"), &backend_named("reference")};
      for (int i = 0; i < 2; ++i) {
        Out& o = out[i];
        o.y.assign(N * C, -1.f);
        o.dx.assign(N * C, -1.f);
        o.dw.assign(C, 0.5f);
        o.db.assign(C, 0.25f);
        o.mean.assign(C, 0.f);
        o.rstd.assign(C, 0.f);
        o.rm.assign(C, 0.1f);
        o.rv.assign(C, 2.f);
        o.nbt.assign(1, 4.f);
        const BatchNormArgs a{.rows = N, .channels = C, .count = masked ? count : N, .training = training,
                              .x = x.data(), .mask = masked ? mask.data() : nullptr, .weight = w.data(),
                              .bias = b.data(), .mean = o.mean.data(), .rstd = o.rstd.data(),
                              .running_mean = o.rm.data(), .running_var = o.rv.data(),
                              .num_batches_tracked = o.nbt.data()};
        backends[i]->batch_norm_forward(a, o.y.data());
        backends[i]->batch_norm_backward(a, dy.data(), o.dx.data(), o.dw.data(), o.db.data());
      }
      const std::string what = std::string(masked ? "masked" : "full") + (training ? ", training" : ", eval");
      EXPECT_EQ(out[0].y, out[1].y) << what;
      EXPECT_EQ(out[0].dx, out[1].dx) << what;
      EXPECT_EQ(out[0].dw, out[1].dw) << what;
      EXPECT_EQ(out[0].db, out[1].db) << what;
      EXPECT_EQ(out[0].mean, out[1].mean) << what;
      EXPECT_EQ(out[0].rstd, out[1].rstd) << what;
      EXPECT_EQ(out[0].rm, out[1].rm) << what;
      EXPECT_EQ(out[0].rv, out[1].rv) << what;
      EXPECT_EQ(out[0].nbt, (std::vector<float>{training ? 5.f : 4.f})) << what;
      EXPECT_EQ(out[1].nbt, out[0].nbt) << what;
    }
  EXPECT_TRUE(backend_named("cpu").supports(BackendOp::batch_norm));
  EXPECT_TRUE(backend_named("reference").supports(BackendOp::batch_norm));
}

// Frozen BatchNorm (fine-tuning's frozen epochs): a training pass runs as eval mode does — the same
// output and dx, bit for bit — changes no statistic and gives the weight and bias no gradient.
TEST(BatchNorm, AFrozenLayerRunsOnItsRunningStatisticsAndKeepsThem) {
  constexpr int64_t B = 3, T = 5, C = 4;
  Layer l(C, 41);
  Rng rng(42);
  const std::vector<float> x = randn(rng, B * T * C), dy = randn(rng, B * T * C);
  const std::vector<int64_t> lengths{5, 2, 4};
  const Pass eval = run_bn(l, x, dy, B, T, lengths, false);
  for (size_t i : {l.bn.weight, l.bn.bias}) l.ps.set_frozen(i, true);
  const std::vector<float> before(l.ps.params(), l.ps.params() + l.ps.size());
  const Pass frozen = run_bn(l, x, dy, B, T, lengths, true);
  EXPECT_EQ(frozen.y, eval.y);
  EXPECT_EQ(frozen.dx, eval.dx);
  EXPECT_EQ(std::vector<float>(l.ps.params(), l.ps.params() + l.ps.size()), before);
  EXPECT_EQ(std::vector<float>(l.ps.grads(), l.ps.grads() + l.ps.size()), std::vector<float>(l.ps.size(), 0.f));
  // Unfrozen, the same pass uses the batch and moves the statistics.
  for (size_t i : {l.bn.weight, l.bn.bias}) l.ps.set_frozen(i, false);
  EXPECT_NE(run_bn(l, x, dy, B, T, lengths, true).y, eval.y);
  EXPECT_NE(std::vector<float>(l.ps.params(), l.ps.params() + l.ps.size()), before);
}

// A training batch of one valid step has no variance: refused naming the key and the fixes.
TEST(BatchNorm, ATrainingBatchOfOneValidStepIsRefused) {
  Layer l(3, 51);
  std::vector<float> x(2 * 3, 1.f), dy(2 * 3, 1.f);
  const std::string e = error_of([&] { run_bn(l, x, dy, 1, 2, {1}, true); });
  EXPECT_CONTAINS(e, "model.norm batch");
  EXPECT_CONTAINS(e, "1 valid step");
  EXPECT_CONTAINS(e, "train.batch_size");
  run_bn(l, x, dy, 1, 2, {1}, false);  // eval mode needs no batch statistics
}

// Buffers: frozen and undecayed from the start, and whatever set_frozen, set_decay, parameter
// groups or the fine-tuning schedule's unfreezing say; the summary counts parameters only.
TEST(ParamStoreBuffers, StayFrozenAndUndecayedAndCountAsNoParameter) {
  ParamStore ps;
  BatchNorm bn(ps, "norms.0", 4);
  const size_t w = ps.add("head.weight", {2, 4});
  ps.finalize();
  EXPECT_TRUE(ps.has_buffers());
  for (size_t i : {bn.running_mean, bn.running_var, bn.num_batches_tracked}) {
    const ParamEntry& e = ps.entries()[i];
    EXPECT_TRUE(e.buffer && e.frozen && !e.decay) << e.name;
    ps.set_frozen(i, false);
    ps.set_decay(i, true);
    EXPECT_TRUE(ps.entries()[i].frozen && !ps.entries()[i].decay) << e.name;
  }
  EXPECT_EQ(ps.find("norms.0.num_batches_tracked")->shape, Shape{});
  EXPECT_FALSE(ps.entries()[bn.weight].frozen || ps.entries()[w].frozen);
  // Groups that freeze nothing still leave the buffers' stretch frozen (one run: they are adjacent).
  const std::vector<ParamGroup> plain(ps.entries().size());
  apply_frozen(ps, plain);
  const std::vector<GroupRun> runs = group_runs(ps, plain);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_FALSE(runs[0].frozen);  // weight, bias
  EXPECT_TRUE(runs[1].frozen);   // running_mean, running_var, num_batches_tracked
  EXPECT_EQ(runs[1].begin, ps.entries()[bn.running_mean].offset);
  EXPECT_EQ(runs[1].end, ps.entries()[bn.num_batches_tracked].offset + 1);
  EXPECT_FALSE(runs[2].frozen);  // head
  EXPECT_EQ(ps.decay_mask()[ps.entries()[bn.running_var].offset], 0);

  // The summary of a cnn with BatchNorm counts weight and bias, not the statistics.
  ModelSpec s;
  s.type = "cnn";
  s.input_size = 2;
  s.lookback = 8;
  s.hidden = 4;
  s.kernel_sizes = {3};
  s.layers = 1;
  s.norm = "batch";
  auto m = build_model(s);
  int64_t counted = 0;
  for (const SummaryRow& r : summarize(s, m->params())) counted += r.params;
  // conv 4*2*3 + 4, norm 4 + 4, head 4 + 1
  EXPECT_EQ(counted, 28 + 8 + 5);
  EXPECT_EQ(static_cast<int64_t>(m->params().size()), 28 + 8 + 4 + 4 + 1 + 5);
}

}  // namespace
}  // namespace seqtrain::testing
