#include "backend/reference/reference_rnn.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace seqtrain {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// out[g] = b1[g] (+ b2[g]) + sum_k in[k] * W[g, k], for g < rows, in double.
void affine(const float* W, const float* in, int64_t rows, int64_t cols, const float* b, double* out) {
  for (int64_t g = 0; g < rows; ++g) {
    double acc = b ? b[g] : 0.0;
    for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(W[g * cols + k]) * in[k];
    out[g] = acc;
  }
}

}  // namespace

// Whether sample n is past its length at time t.
bool ReferenceRecurrentLayers::padded(const Saved& s, int64_t t, int64_t n) {
  return !s.lengths.empty() && t >= s.lengths[n];
}

ReferenceRecurrentLayers::ReferenceRecurrentLayers(const RecurrentSpec& spec) : spec_(spec), saved_(spec.inputs.size()) {}

void ReferenceRecurrentLayers::forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y,
                                       Arena&, bool, std::span<const int64_t> lengths) {
  ST_CHECK(layer < saved_.size() && x.shape.size() == 3 && x.shape[2] == spec_.inputs[layer],
           "recurrent layer {} input must be [time, batch, {}], got {}", layer, spec_.inputs.at(layer),
           shape_str(x.shape));
  Saved& s = saved_[layer];
  s.x = x;
  s.y = y;
  s.lengths = lengths;
  for (int64_t d = 0; d < spec_.dirs; ++d) forward_dir(s, w, d);
}

// One direction over the sequence: h, c start at zero; step s is time t = s (or T-1-s reversed).
// A sample's steps past its length leave its h and c as they are (zero before the reverse
// direction's first valid step) and output zeros; their saved gates and state are zero.
void ReferenceRecurrentLayers::forward_dir(Saved& s, const RecurrentWeights& w, int64_t d) {
  const int64_t T = s.x.shape[0], N = s.x.shape[1], C = s.x.shape[2], H = spec_.hidden;
  const bool lstm = spec_.cell == RnnCell::lstm;
  const int64_t GH = rnn_gates(spec_.cell) * H, ldy = H * spec_.dirs;
  s.gates[d].assign(T * N * GH, 0.f);
  s.extra[d].assign(T * N * H, 0.f);
  std::vector<double> ai(GH), ah(GH), h(N * H, 0.0), c(N * H, 0.0);
  std::vector<float> hf(H);
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = d == 1 ? T - 1 - step : step;
    for (int64_t n = 0; n < N; ++n) {
      if (padded(s, t, n)) {  // its gates and extra stay zero
        std::fill_n(s.y.f32() + (t * N + n) * ldy + d * H, H, 0.f);
        continue;
      }
      for (int64_t k = 0; k < H; ++k) hf[k] = static_cast<float>(h[n * H + k]);
      affine(w.w_ih[d], s.x.f32() + (t * N + n) * C, GH, C, w.b_ih[d], ai.data());
      affine(w.w_hh[d], hf.data(), GH, H, w.b_hh[d], ah.data());
      float* gates = s.gates[d].data() + (t * N + n) * GH;
      float* extra = s.extra[d].data() + (t * N + n) * H;
      float* out = s.y.f32() + (t * N + n) * ldy + d * H;
      for (int64_t j = 0; j < H; ++j) {
        double hn;
        if (lstm) {
          const double i = sigmoid(ai[j] + ah[j]), f = sigmoid(ai[H + j] + ah[H + j]);
          const double g = std::tanh(ai[2 * H + j] + ah[2 * H + j]), o = sigmoid(ai[3 * H + j] + ah[3 * H + j]);
          const double cn = f * c[n * H + j] + i * g;
          hn = o * std::tanh(cn);
          c[n * H + j] = static_cast<float>(cn);  // fp32 storage, as the output
          extra[j] = static_cast<float>(cn);
          gates[j] = static_cast<float>(i); gates[H + j] = static_cast<float>(f);
          gates[2 * H + j] = static_cast<float>(g); gates[3 * H + j] = static_cast<float>(o);
        } else {
          const double r = sigmoid(ai[j] + ah[j]), z = sigmoid(ai[H + j] + ah[H + j]);
          const double nn = std::tanh(ai[2 * H + j] + r * ah[2 * H + j]);
          hn = (1.0 - z) * nn + z * h[n * H + j];
          extra[j] = static_cast<float>(ah[2 * H + j]);
          gates[j] = static_cast<float>(r); gates[H + j] = static_cast<float>(z); gates[2 * H + j] = static_cast<float>(nn);
        }
        h[n * H + j] = static_cast<float>(hn);
        out[j] = static_cast<float>(hn);
      }
    }
  }
}

Tensor ReferenceRecurrentLayers::backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena,
                                          bool want_dx) {
  Saved& s = saved_.at(layer);
  ST_CHECK(s.x.ptr != nullptr && dy.shape == s.y.shape, "recurrent layer {}: backward without a matching forward",
           layer);
  std::vector<double> dx(want_dx ? s.x.numel() : 0, 0.0);
  for (int64_t d = 0; d < spec_.dirs; ++d) backward_dir(s, w, d, dy.f32(), want_dx ? &dx : nullptr);
  if (!want_dx) return Tensor();
  Tensor out = arena.tensor(s.x.shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = static_cast<float>(dx[i]);
  return out;
}

// Backpropagation through time for one direction, processing order reversed: dh (and the LSTM's
// dc) carried from step to step; weight and bias gradients summed in double over the whole
// sequence and added to the fp32 gradients once.
void ReferenceRecurrentLayers::backward_dir(Saved& s, const RecurrentWeights& w, int64_t d, const float* dy,
                                            std::vector<double>* dx) {
  const int64_t T = s.x.shape[0], N = s.x.shape[1], C = s.x.shape[2], H = spec_.hidden;
  const bool lstm = spec_.cell == RnnCell::lstm;
  const int64_t GH = rnn_gates(spec_.cell) * H, ldy = H * spec_.dirs;
  std::vector<double> dWih(GH * C, 0.0), dWhh(GH * H, 0.0), dbih(GH, 0.0), dbhh(GH, 0.0);
  std::vector<double> dh(N * H, 0.0), dc(N * H, 0.0), dai(GH), dah(GH), dh_new(H);
  const std::vector<float> zeros(H, 0.f);
  for (int64_t step = T - 1; step >= 0; --step) {
    const int64_t t = d == 1 ? T - 1 - step : step, tp = d == 1 ? t + 1 : t - 1;
    for (int64_t n = 0; n < N; ++n) {
      // A padded step passes no gradient: dh and dc stay as they are (zero in the forward
      // direction, which meets the padding first; unread in the reverse one, which meets it last).
      if (padded(s, t, n)) continue;
      const float* hprev = step > 0 ? s.y.f32() + (tp * N + n) * ldy + d * H : zeros.data();
      const float* cprev = step > 0 ? s.extra[d].data() + (tp * N + n) * H : zeros.data();
      const float* gt = s.gates[d].data() + (t * N + n) * GH;
      const float* ex = s.extra[d].data() + (t * N + n) * H;
      const float* x = s.x.f32() + (t * N + n) * C;
      for (int64_t j = 0; j < H; ++j) {
        const double dhj = static_cast<double>(dy[(t * N + n) * ldy + d * H + j]) + dh[n * H + j];
        if (lstm) {
          const double i = gt[j], f = gt[H + j], g = gt[2 * H + j], o = gt[3 * H + j], tc = std::tanh(ex[j]);
          const double dcj = dc[n * H + j] + dhj * o * (1.0 - tc * tc);
          dai[j] = dcj * g * i * (1.0 - i);
          dai[H + j] = dcj * cprev[j] * f * (1.0 - f);
          dai[2 * H + j] = dcj * i * (1.0 - g * g);
          dai[3 * H + j] = dhj * tc * o * (1.0 - o);
          for (int64_t q = 0; q < 4; ++q) dah[q * H + j] = dai[q * H + j];
          dc[n * H + j] = dcj * f;
          dh_new[j] = 0.0;
        } else {
          const double r = gt[j], z = gt[H + j], nn = gt[2 * H + j];
          const double dan = dhj * (1.0 - z) * (1.0 - nn * nn);
          dai[j] = dah[j] = dan * ex[j] * r * (1.0 - r);
          dai[H + j] = dah[H + j] = dhj * (hprev[j] - nn) * z * (1.0 - z);
          dai[2 * H + j] = dan;
          dah[2 * H + j] = dan * r;
          dh_new[j] = dhj * z;
        }
      }
      for (int64_t g = 0; g < GH; ++g) {
        dbih[g] += dai[g];
        dbhh[g] += dah[g];
        for (int64_t k = 0; k < C; ++k) dWih[g * C + k] += dai[g] * x[k];
        for (int64_t k = 0; k < H; ++k) dWhh[g * H + k] += dah[g] * hprev[k];
        for (int64_t k = 0; k < H; ++k) dh_new[k] += dah[g] * w.w_hh[d][g * H + k];
        if (dx)
          for (int64_t k = 0; k < C; ++k) (*dx)[(t * N + n) * C + k] += dai[g] * w.w_ih[d][g * C + k];
      }
      for (int64_t k = 0; k < H; ++k) dh[n * H + k] = dh_new[k];
    }
  }
  auto add = [](float* dst, const std::vector<double>& src) {
    for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<float>(dst[i] + src[i]);
  };
  add(w.dw_ih[d], dWih);
  add(w.dw_hh[d], dWhh);
  add(w.db_ih[d], dbih);
  add(w.db_hh[d], dbhh);
}

}  // namespace seqtrain
