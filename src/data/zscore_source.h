// Per-feature z-score for sources whose samples are [steps, features] windows (data.source
// npy): the statistics are fitted over every valid time step of every training sample, one mean and
// population std (ddof 0) per feature, and applied to x as batches are filled, so the mapped
// files are never copied. y passes through unchanged.
#pragma once
#include <memory>

#include "data/loader.h"
#include "data/normalizer.h"

namespace seqtrain {

// zscore statistics of x over all samples of `src` (columns named "x0", "x1", ...), read in
// chunks so memory stays bounded; a constant feature gets scale 1.
Normalizer fit_feature_zscore(const BatchSource& src, int64_t steps, int64_t features);

class ZscoreSource final : public BatchSource {
 public:
  ZscoreSource(std::shared_ptr<const BatchSource> base, Normalizer stats, int64_t features);
  int64_t size() const override { return base_->size(); }
  int64_t x_size() const override { return base_->x_size(); }
  int64_t y_size() const override { return base_->y_size(); }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  bool has_lengths() const override { return base_->has_lengths(); }
  void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const override { base_->fill_lengths(idx, lengths); }

 private:
  std::shared_ptr<const BatchSource> base_;
  Normalizer stats_;
  int64_t features_;
};

}  // namespace seqtrain
