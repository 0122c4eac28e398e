// GradBuckets: the gradient all-reduce (or, under train.zero, reduce-scatter) of a data-parallel
// step cut into buckets that start while the backward still runs (PyTorch DDP's buckets,
// Horovod's tensor fusion; DeepSpeed ZeRO's bucketed reduce-scatter). The model's backward
// reports, layer by layer from the last, which tail of the flat gradient buffer is final
// (nn/grad_ready.h); every bucket inside that tail starts its sum over the ranks at once
// (Communicator::start_sum, nonblocking under MPI), so the sum of the last layers' gradients
// travels while the first layers' backward computes. finish() starts what is left and waits
// for all; only then does the step unscale, clip and update.
// The result is the unbucketed all-reduce's bit for bit: each element is still the sum over the
// ranks in rank order, in double (the buckets only cut the buffer), and the accumulation's
// normalisation (gradients x R / total count) is applied to each bucket just before it starts,
// the same float multiply the step applies to the whole buffer otherwise.
#pragma once
#include <cstddef>
#include <vector>

#include "nn/grad_ready.h"
#include "train/communicator.h"

namespace seqtrain {

class Backend;

// Buckets of about `bucket` values over [0, n), the last first (the order a backward finishes
// them): each value in exactly one bucket; bucket 0 of a positive `bucket` ends at n.
std::vector<Slice> gradient_buckets(size_t n, size_t bucket);

class GradBuckets final : public GradReadyHook {
 public:
  // scale: the factor each bucket is multiplied by before it starts (1: none). scatter
  // (train.zero): each rank needs only its slice of the sums (Communicator::SumPart), the
  // reduce-scatter bucket by bucket.
  GradBuckets(Communicator& comm, Backend& backend, float* grads, size_t n, size_t bucket, double scale,
              bool scatter = false);
  // Starts every bucket inside [offset, n) not started yet, in bucket order; lets earlier ones
  // progress.
  void ready_from(size_t offset) override;
  // Starts the rest and waits for every sum.
  void finish();
  size_t started() const { return next_; }
  size_t count() const { return buckets_.size(); }

 private:
  void start(const Slice& b);
  Communicator& comm_;
  Backend& backend_;
  float* grads_;
  size_t n_;
  double scale_;
  bool scatter_;
  std::vector<Slice> buckets_;
  size_t next_ = 0;  // buckets started
};

}  // namespace seqtrain
