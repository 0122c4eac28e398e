#include "models/rnn_pooling.h"

#include <algorithm>

#include "backend/host_view.h"

namespace seqtrain {

RnnPooling::RnnPooling(const std::string& mode, Backend& backend)
    : mode_(mode == "mean" ? Mode::mean : mode == "max" ? Mode::max : Mode::last), backend_(backend) {
  ST_CHECK(mode == "last" || mode == "mean" || mode == "max",
           "model.pooling '{}' does not apply to an RNN: use last, mean or max (cls is the transformer's)", mode);
}

template <class Fill>
void RnnPooling::write_host(float* dst, size_t n, Fill&& fill) {
  if (backend_.host_accessible()) return fill(dst);
  stage_.resize(n);
  fill(stage_.data());
  backend_.copy_from_host(stage_.data(), dst, n * sizeof(float));
}

Tensor RnnPooling::forward(const Tensor& top, std::span<const int64_t> lengths, Arena& arena) {
  shape_ = top.shape;
  lengths_.assign(lengths.begin(), lengths.end());
  const int64_t T = shape_[0], N = shape_[1], F = shape_[2];
  if (mode_ == Mode::last && lengths.empty()) return top.slice0(T - 1, T).reshape({N, F});
  Tensor out = arena.tensor({N, F});
  if (mode_ == Mode::last) {
    for (int64_t n = 0; n < N; ++n)
      backend_.copy(top.f32() + ((lengths[n] - 1) * N + n) * F, out.f32() + n * F, static_cast<size_t>(F));
    return out;
  }
  const HostReadView y(backend_, top.f32(), static_cast<size_t>(top.numel()));
  if (mode_ == Mode::max) argmax_.resize(N * F);
  write_host(out.f32(), static_cast<size_t>(N * F), [&](float* o) {
    for (int64_t n = 0; n < N; ++n) {
      float* on = o + n * F;
      std::copy_n(y.data() + n * F, F, on);  // step 0
      if (mode_ == Mode::max) {
        int32_t* at = argmax_.data() + n * F;
        std::fill_n(at, F, 0);
        for (int64_t t = 1; t < steps(n); ++t) {
          const float* yt = y.data() + (t * N + n) * F;
          for (int64_t j = 0; j < F; ++j)
            if (yt[j] > on[j]) on[j] = yt[j], at[j] = static_cast<int32_t>(t);
        }
      } else {
        for (int64_t t = 1; t < steps(n); ++t) {
          const float* yt = y.data() + (t * N + n) * F;
          for (int64_t j = 0; j < F; ++j) on[j] += yt[j];
        }
        const float inv = 1.f / static_cast<float>(steps(n));
        for (int64_t j = 0; j < F; ++j) on[j] *= inv;
      }
    }
  });
  return out;
}

Tensor RnnPooling::backward(const Tensor& dpooled, Arena& arena) {
  const int64_t T = shape_[0], N = shape_[1], F = shape_[2];
  if (mode_ == Mode::last) {
    Tensor dtop = arena.zeros(shape_);
    // Without lengths one block, the step T-1 of every sample.
    if (lengths_.empty())
      backend_.copy(dpooled.f32(), dtop.f32() + (T - 1) * N * F, static_cast<size_t>(N * F));
    for (size_t n = 0; n < lengths_.size(); ++n)
      backend_.copy(dpooled.f32() + n * F, dtop.f32() + ((lengths_[n] - 1) * N + n) * F, static_cast<size_t>(F));
    return dtop;
  }
  Tensor dtop = arena.tensor(shape_);
  const HostReadView d(backend_, dpooled.f32(), static_cast<size_t>(dpooled.numel()));
  write_host(dtop.f32(), static_cast<size_t>(dtop.numel()), [&](float* g) {
    std::fill_n(g, dtop.numel(), 0.f);
    for (int64_t n = 0; n < N; ++n) {
      const float* dn = d.data() + n * F;
      if (mode_ == Mode::max) {
        const int32_t* at = argmax_.data() + n * F;
        for (int64_t j = 0; j < F; ++j) g[(at[j] * N + n) * F + j] = dn[j];
        continue;
      }
      const float inv = 1.f / static_cast<float>(steps(n));
      for (int64_t t = 0; t < steps(n); ++t)
        for (int64_t j = 0; j < F; ++j) g[(t * N + n) * F + j] = dn[j] * inv;
    }
  });
  return dtop;
}

}  // namespace seqtrain
