// GradBuckets: see grad_buckets.h.
#include "train/grad_buckets.h"

#include "backend/backend.h"

namespace seqtrain {

std::vector<Slice> gradient_buckets(size_t n, size_t bucket) {
  std::vector<Slice> out;
  if (n == 0) return out;
  if (bucket == 0 || bucket >= n) return {Slice{0, n}};
  for (size_t end = n; end > 0;) {
    // A remainder under half a bucket joins the last one instead of travelling alone.
    const size_t begin = end > bucket + bucket / 2 ? end - bucket : 0;
    out.push_back({begin, end});
    end = begin;
  }
  return out;
}

GradBuckets::GradBuckets(Communicator& comm, Backend& backend, float* grads, size_t n, size_t bucket, double scale,
                         bool scatter)
    : comm_(comm), backend_(backend), grads_(grads), n_(n), scale_(scale), scatter_(scatter),
      buckets_(gradient_buckets(n, bucket)) {}

void GradBuckets::start(const Slice& b) {
  if (scale_ != 1.0) backend_.scale(grads_ + b.begin, b.size(), static_cast<float>(scale_));
  comm_.start_sum(grads_ + b.begin, b.size(), SumPart{scatter_, b.begin, n_});
}

void GradBuckets::ready_from(size_t offset) {
  while (next_ < buckets_.size() && buckets_[next_].begin >= offset) start(buckets_[next_++]);
  comm_.progress();
}

void GradBuckets::finish() {
  while (next_ < buckets_.size()) start(buckets_[next_++]);
  comm_.finish_sums();
}

}  // namespace seqtrain
