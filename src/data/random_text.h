// Random-offset text samples, as nanoGPT's get_batch draws them: each sample is block_size
// tokens starting at a uniformly random offset of a token range, with the next tokens as
// targets. The offset of sample i in epoch e is a pure function of (seed, e, i):
//   offset = begin + Rng(mix_seed(seed, e), i).below(end - begin - block_size)
// (core/rng.h; below() is unbiased), so any worker count, a resumed run and a replayed
// gradient accumulation all see the same tokens, and epochs differ from each other.
// An epoch is samples_per_epoch draws (with replacement); docs/DATA.md, "Random offsets".
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/loader.h"

namespace seqtrain {

class RandomTextSource final : public BatchSource {
 public:
  // Draws over tokens [begin, end) (end -1 = all). samples_per_epoch 0 = (end - begin) /
  // block_size, at least 1. Throws Error naming `where` when the range is shorter than
  // block_size + 1 tokens (one input block and its last target).
  RandomTextSource(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size, int64_t samples_per_epoch,
                   uint64_t seed, int64_t begin = 0, int64_t end = -1, std::string where = "<text>");
  int64_t size() const override { return samples_; }
  int64_t x_size() const override { return block_; }
  int64_t y_size() const override { return block_; }
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;

  // The first token of sample `sample` of epoch `epoch`, in [begin, end - block_size).
  int64_t offset(int64_t epoch, int64_t sample) const;
  // The number of possible offsets: end - begin - block_size.
  int64_t starts() const { return end_ - begin_ - block_; }

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t block_, samples_ = 0, begin_, end_;
  uint64_t seed_;
};

}  // namespace seqtrain
