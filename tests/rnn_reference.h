// Double-precision reference of PyTorch's nn.LSTM / nn.GRU (batch_first, zero initial state)
// and of the forecaster head, written from the equations in PyTorch's documentation. Tests use
// it for finite-difference gradient checks and as a second opinion on oneDNN's forward.
#pragma once
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "nn/params.h"

namespace seqtrain::testing {

using DParams = std::map<std::string, std::vector<double>>;

inline DParams to_double(ParamStore& ps) {
  DParams out;
  for (size_t i = 0; i < ps.entries().size(); ++i) {
    Tensor t = ps.param(i);
    out[ps.entries()[i].name].assign(t.f32(), t.f32() + t.numel());
  }
  return out;
}

inline double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// x: [N, T, C] batch first. Returns the top layer's output [N, T, H*D]. With lengths ([N]) sample
// n runs its first lengths[n] steps only (the reverse direction from its last valid one) and
// outputs zeros after them, as PyTorch's packed sequences.
inline std::vector<double> ref_rnn(bool lstm, const DParams& p, const std::vector<double>& x, int64_t N,
                                   int64_t T, int64_t C, int64_t H, int64_t L, int64_t D,
                                   const std::vector<int64_t>& lengths = {}) {
  const int64_t G = lstm ? 4 : 3;
  std::vector<double> in = x;
  int64_t cin = C;
  for (int64_t k = 0; k < L; ++k) {
    std::vector<double> out(N * T * H * D, 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(k) + (d ? "_reverse" : "");
      const auto& wih = p.at("rnn.weight_ih" + sfx);
      const auto& whh = p.at("rnn.weight_hh" + sfx);
      const auto& bih = p.at("rnn.bias_ih" + sfx);
      const auto& bhh = p.at("rnn.bias_hh" + sfx);
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h(H, 0.0), c(H, 0.0), gi(G * H), gh(G * H);
        const int64_t Tn = lengths.empty() ? T : lengths[n];
        for (int64_t s = 0; s < Tn; ++s) {
          const int64_t t = d ? Tn - 1 - s : s;
          const double* xt = &in[(n * T + t) * cin];
          for (int64_t r = 0; r < G * H; ++r) {
            double a = bih[r], b = bhh[r];
            for (int64_t i = 0; i < cin; ++i) a += wih[r * cin + i] * xt[i];
            for (int64_t i = 0; i < H; ++i) b += whh[r * H + i] * h[i];
            gi[r] = a;
            gh[r] = b;
          }
          for (int64_t o = 0; o < H; ++o) {
            if (lstm) {
              double ig = sigm(gi[o] + gh[o]), fg = sigm(gi[H + o] + gh[H + o]);
              double gg = std::tanh(gi[2 * H + o] + gh[2 * H + o]), og = sigm(gi[3 * H + o] + gh[3 * H + o]);
              c[o] = fg * c[o] + ig * gg;
              h[o] = og * std::tanh(c[o]);
            } else {
              double r = sigm(gi[o] + gh[o]), z = sigm(gi[H + o] + gh[H + o]);
              double nn = std::tanh(gi[2 * H + o] + r * gh[2 * H + o]);
              h[o] = (1 - z) * nn + z * h[o];
            }
          }
          for (int64_t o = 0; o < H; ++o) out[((n * T + t) * D + d) * H + o] = h[o];
        }
      }
    }
    in = std::move(out);
    cin = H * D;
  }
  return in;
}

// Forecaster: last time step of the top layer -> head Linear. Returns [N, out].
inline std::vector<double> ref_forecaster(bool lstm, const DParams& p, const std::vector<double>& x, int64_t N,
                                          int64_t T, int64_t C, int64_t H, int64_t L, int64_t D, int64_t out) {
  auto top = ref_rnn(lstm, p, x, N, T, C, H, L, D);
  const auto& w = p.at("head.weight");
  const auto& b = p.at("head.bias");
  std::vector<double> y(N * out);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < out; ++j) {
      double a = b[j];
      for (int64_t i = 0; i < H * D; ++i) a += w[j * H * D + i] * top[((n * T + T - 1) * H * D) + i];
      y[n * out + j] = a;
    }
  return y;
}

}  // namespace seqtrain::testing
