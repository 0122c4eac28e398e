// RandomTextSource: block_size windows of a token range at seeded random offsets.
#include "data/random_text.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"
#include "data/text.h"

namespace seqtrain {

RandomTextSource::RandomTextSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size,
                                   int64_t samples_per_epoch, uint64_t seed, int64_t begin, int64_t end,
                                   std::string where)
    : tokens_(std::move(tokens)), block_(block_size), begin_(begin), seed_(seed) {
  ST_CHECK(samples_per_epoch >= 0, "data.samples_per_epoch must be >= 0 (0 = tokens / block_size), got {}",
           samples_per_epoch);
  end_ = checked_token_range(tokens_.get(), block_, begin_, end, "RandomTextSource", where);
  samples_ = samples_per_epoch > 0 ? samples_per_epoch : std::max<int64_t>(1, (end_ - begin_) / block_);
}

int64_t RandomTextSource::offset(int64_t epoch, int64_t sample) const {
  ST_CHECK(0 <= sample && sample < samples_, "text sample {} out of range: an epoch has {}", sample, samples_);
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(sample));
  return begin_ + static_cast<int64_t>(rng.below(static_cast<uint64_t>(starts())));
}

void RandomTextSource::fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const {
  const int32_t* t = tokens_->data();
  for (size_t b = 0; b < idx.size(); ++b) {
    const int32_t* w = t + offset(epoch, idx[b]);
    const int64_t row = static_cast<int64_t>(b) * block_;
    for (int64_t k = 0; k < block_; ++k) {
      if (x) x[row + k] = static_cast<float>(w[k]);
      if (y) y[row + k] = static_cast<float>(w[k + 1]);
    }
  }
}

}  // namespace seqtrain
