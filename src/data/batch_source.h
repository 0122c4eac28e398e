// BatchSource: what the loader reads samples from (an npy file, windows of a series, text blocks,
// and the wrappers that concatenate, normalise, augment or cache them). Its contract is what
// makes a batch independent of the worker count and the worker that fills it.
#pragma once
#include <cstdint>
#include <span>

#include "data/window_dataset.h"

namespace seqtrain {

// A random-access set of samples of fixed size. fill() is called concurrently from several
// worker threads, so it must be const-safe (no shared mutable state) and must depend only on
// its arguments: that is what makes batches independent of the worker count.
struct BatchSource {
  virtual ~BatchSource() = default;
  virtual int64_t size() const = 0;    // number of samples
  virtual int64_t x_size() const = 0;  // floats per sample of x
  virtual int64_t y_size() const = 0;  // floats per sample of y (0 = no targets)
  // Writes samples idx[0..] as rows of x ([B, x_size]) and y ([B, y_size]); y may be null.
  virtual void fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const = 0;
  // Variable-length samples (data.npy.*_len, data.npy.pad_value): whether samples carry their own
  // valid length, and each one's (1..steps; the steps after it are padding). A length never
  // depends on the epoch: augmentation changes values, not which steps are real.
  virtual bool has_lengths() const { return false; }
  virtual void fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const;
};

// Adapter: a WindowDataset (which must outlive it) as a BatchSource. The epoch is ignored.
class WindowSource final : public BatchSource {
 public:
  explicit WindowSource(const WindowDataset& ds) : ds_(ds) {}
  int64_t size() const override { return ds_.size(); }
  int64_t x_size() const override { return ds_.x_size(); }
  int64_t y_size() const override { return ds_.y_size(); }
  void fill(std::span<const int64_t> idx, int64_t, float* x, float* y) const override { ds_.fill_batch(idx, x, y); }

 private:
  const WindowDataset& ds_;
};

}  // namespace seqtrain
