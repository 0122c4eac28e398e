// Two passes over the training x (mean, then squared deviations) rather than one running
// sum of squares: features with a large offset and a small spread keep their precision.
#include "data/zscore_source.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace seqtrain {

Normalizer fit_feature_zscore(const BatchSource& src, int64_t steps, int64_t features) {
  ST_CHECK(steps * features == src.x_size() && src.size() > 0, "fit_feature_zscore: bad sample shape");
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / src.x_size());
  std::vector<float> x(chunk * src.x_size());
  std::vector<int64_t> idx, len(chunk, steps);
  // Padding is not data: only each sample's valid steps enter the statistics.
  int64_t count = 0;
  auto each_chunk = [&](auto&& f) {
    count = 0;
    for (int64_t b = 0; b < src.size(); b += chunk) {
      const int64_t n = std::min(chunk, src.size() - b);
      idx.resize(n);
      std::iota(idx.begin(), idx.end(), b);
      src.fill(idx, 0, x.data(), nullptr);
      if (src.has_lengths()) src.fill_lengths(idx, len.data());
      for (int64_t i = 0; i < n; ++i) {
        count += len[i];
        for (int64_t t = 0; t < len[i]; ++t)
          for (int64_t f2 = 0; f2 < features; ++f2) f(f2, x[(i * steps + t) * features + f2]);
      }
    }
  };
  std::vector<double> sum(features, 0.0), dev(features, 0.0);
  each_chunk([&](int64_t f, float v) { sum[f] += v; });
  Normalizer n;
  n.method = "zscore";
  for (int64_t f = 0; f < features; ++f) {
    n.columns.push_back("x" + std::to_string(f));
    n.shift.push_back(sum[f] / static_cast<double>(count));
  }
  each_chunk([&](int64_t f, float v) { dev[f] += (v - n.shift[f]) * (v - n.shift[f]); });
  for (int64_t f = 0; f < features; ++f) {
    const double sd = std::sqrt(dev[f] / static_cast<double>(count));
    n.scale.push_back(sd > 0 ? sd : 1.0);
  }
  return n;
}

ZscoreSource::ZscoreSource(std::shared_ptr<const BatchSource> base, Normalizer stats, int64_t features)
    : base_(std::move(base)), stats_(std::move(stats)), features_(features) {
  ST_CHECK(features_ > 0 && base_->x_size() % features_ == 0 &&
               static_cast<int64_t>(stats_.scale.size()) == features_,
           "ZscoreSource: {} statistics for samples of {} values", stats_.scale.size(), base_->x_size());
}

void ZscoreSource::fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const {
  base_->fill(idx, epoch, x, y);
  if (!x) return;
  const int64_t rows = static_cast<int64_t>(idx.size()) * (base_->x_size() / features_);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t f = 0; f < features_; ++f) x[r * features_ + f] = stats_.apply(f, x[r * features_ + f]);
}

}  // namespace seqtrain
