// The LSTM/GRU forecaster against a double-precision reference: forward values, and every
// parameter gradient by central finite differences of that reference.
#include <gtest/gtest.h>

#include "models/forecaster.h"
// Both RNN implementations (seqtrain's fused kernels and oneDNN's primitives) are checked.
#include "rnn_reference.h"
#include "model_pass.h"
#include "test_util.h"

namespace seqtrain::testing {
namespace {

using seqtrain::testing::ModelPass;

struct RnnCase { const char* type; int64_t layers; bool bidir; const char* impl = "fused"; };

class RnnGrad : public ::testing::TestWithParam<RnnCase> {};

TEST_P(RnnGrad, ForwardAndFiniteDifferences) {
  const RnnCase c = GetParam();
  const int64_t N = 3, T = 5, C = 4, H = 6, OUT = 2;
  ModelSpec spec{c.type, C, T, H, c.layers, c.bidir, 0.f, OUT, c.impl};
  Forecaster model(spec);
  Rng rng(7);
  model.init(rng);
  const bool lstm = std::string(c.type) == "lstm";
  const int64_t D = c.bidir ? 2 : 1;

  std::vector<float> x(N * T * C), dy(N * OUT);
  for (auto& v : x) v = rng.normal();
  for (auto& v : dy) v = rng.normal();
  Arena arena;
  Tensor y = ModelPass(model, arena, true).forward(Tensor(x.data(), {N, T, C}));
  model.params().zero_grad();
  ModelPass(model, arena, true).backward(Tensor(dy.data(), {N, OUT}));

  DParams p = to_double(model.params());
  std::vector<double> xd(x.begin(), x.end());
  auto yref = ref_forecaster(lstm, p, xd, N, T, C, H, c.layers, D, OUT);
  std::vector<float> yv(y.f32(), y.f32() + y.numel());
  EXPECT_LT(rel_err(yv, yref), 1e-5);

  // d/dp sum(dy * y) by central differences on the double reference, for a sample of every
  // parameter tensor's elements.
  auto objective = [&](const DParams& q) {
    auto yy = ref_forecaster(lstm, q, xd, N, T, C, H, c.layers, D, OUT);
    double s = 0;
    for (size_t i = 0; i < yy.size(); ++i) s += dy[i] * yy[i];
    return s;
  };
  const double eps = 1e-6;
  for (size_t e = 0; e < model.params().entries().size(); ++e) {
    const auto& entry = model.params().entries()[e];
    Tensor g = model.params().grad(e);
    std::vector<double> fd, an;
    const int64_t n = g.numel(), stride = std::max<int64_t>(1, n / 23);
    for (int64_t i = 0; i < n; i += stride) {
      DParams q = p;
      q[entry.name][i] += eps;
      double up = objective(q);
      q[entry.name][i] -= 2 * eps;
      double down = objective(q);
      fd.push_back((up - down) / (2 * eps));
      an.push_back(g.f32()[i]);
    }
    EXPECT_LT(rel_err(an, fd), 1e-3) << entry.name << " an[0..3]=" << an[0] << "," << an[1] << "," << an[2] << " fd=" << fd[0] << "," << fd[1] << "," << fd[2];
  }
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnGrad,
                         ::testing::Values(RnnCase{"lstm", 1, false}, RnnCase{"lstm", 2, true},
                                           RnnCase{"gru", 1, false}, RnnCase{"gru", 2, true},
                                           RnnCase{"lstm", 3, false}, RnnCase{"gru", 3, true},
                                           RnnCase{"lstm", 1, false, "onednn"}, RnnCase{"lstm", 2, true, "onednn"},
                                           RnnCase{"gru", 1, false, "onednn"}, RnnCase{"gru", 2, true, "onednn"}),
                         [](const auto& info) {
                           return std::string(info.param.type) + "_l" + std::to_string(info.param.layers) +
                                  (info.param.bidir ? "_bi_" : "_uni_") + info.param.impl;
                         });

}  // namespace
}  // namespace seqtrain::testing
