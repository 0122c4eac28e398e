// HostAllocator: where the loader's slot buffers (host memory the step reads each batch from)
// come from. The default is ordinary heap memory; a device backend hands out page-locked memory
// (cudaHostAlloc), from which host-to-device copies run asynchronously, without a staging copy.
// FallbackHostAllocator wraps such a primary: page-locked memory is a scarce, pinned resource
// the driver may refuse (limits, a container's locked-memory cap), and a refusal must cost
// speed, never the run: the buffer then comes from the heap, and the fallback is counted and
// explained once.
// A device may read such a buffer after the host has handed it on (an asynchronous copy queued
// from it, backend/pinned_buffers.h): await_readers is what the buffer's owner calls before
// writing it again, and blocks until those reads have run.
#pragma once
#include <cstddef>
#include <mutex>
#include <set>
#include <string>

namespace seqtrain {

struct HostAllocator {
  virtual ~HostAllocator() = default;
  virtual float* allocate(size_t n) = 0;          // n floats; never null (throw on failure)
  virtual void deallocate(float* p, size_t n) = 0;
  // Blocks until nothing still reads buffer p (an allocate() result); the default: nothing reads
  // a buffer behind its owner's back.
  virtual void await_readers(const float* p) { (void)p; }
};

class FallbackHostAllocator final : public HostAllocator {
 public:
  explicit FallbackHostAllocator(HostAllocator& primary) : primary_(primary) {}
  ~FallbackHostAllocator() override = default;
  // The primary's buffer, or, when the primary throws, a heap buffer (never null).
  float* allocate(size_t n) override;
  // Back to whichever allocator the buffer came from.
  void deallocate(float* p, size_t n) override;
  // The primary's, for its buffers (a heap buffer has no readers but its owner).
  void await_readers(const float* p) override;

  size_t fallbacks() const;        // buffers that came from the heap instead of the primary
  std::string first_failure() const;  // the primary's first refusal, empty if none

 private:
  HostAllocator& primary_;
  mutable std::mutex mu_;
  std::set<float*> heap_;  // buffers the fallback made
  size_t fallbacks_ = 0;
  std::string first_failure_;
};

}  // namespace seqtrain
