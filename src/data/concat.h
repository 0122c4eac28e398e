// Several files per split: glob expansion of a path pattern, and ConcatSource, which joins
// sources of equal sample size into one index space (file 0's samples first, then file 1's,
// ...), so shuffling and batching work across file boundaries.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"

namespace seqtrain {

// The files matching a glob pattern (*, ?, [...]), sorted, so the order and hence the sample
// indices do not depend on the file system. A pattern without wildcards must name an existing
// file. Error naming `key` (e.g. "data.train") when nothing matches.
std::vector<std::string> glob_files(const std::string& pattern, const std::string& key);

class ConcatSource final : public BatchSource {
 public:
  // Every part must have the same x_size and y_size (Error naming the part's position and `names`
  // entry when not); parts are shared so the concatenation keeps them alive.
  ConcatSource(std::vector<std::shared_ptr<const BatchSource>> parts, std::vector<std::string> names = {});
  int64_t size() const override { return offsets_.back(); }
  int64_t x_size() const override { return parts_.front()->x_size(); }
  int64_t y_size() const override { return parts_.front()->y_size(); }
  // Splits idx into runs of consecutive positions that fall in the same part and fills each
  // run with one call to that part.
  void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const override;
  bool has_lengths() const override { return parts_.front()->has_lengths(); }
  void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const override;

 private:
  // f(part, its local indices, position of the run's first row in idx) per run of idx in one part.
  template <typename F>
  void for_runs(std::span<const int64_t> idx, F&& f) const;
  std::vector<std::shared_ptr<const BatchSource>> parts_;
  std::vector<int64_t> offsets_;  // offsets_[p] = first global index of part p; back() = total
};

}  // namespace seqtrain
