#include "core/host_allocator.h"

#include <exception>

namespace seqtrain {

float* FallbackHostAllocator::allocate(size_t n) {
  try {
    return primary_.allocate(n);
  } catch (const std::exception& e) {
    float* p = new float[n == 0 ? 1 : n];
    std::lock_guard<std::mutex> lock(mu_);
    heap_.insert(p);
    if (fallbacks_++ == 0) first_failure_ = e.what();
    return p;
  }
}

void FallbackHostAllocator::deallocate(float* p, size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (heap_.erase(p)) {
      delete[] p;
      return;
    }
  }
  primary_.deallocate(p, n);
}

void FallbackHostAllocator::await_readers(const float* p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (heap_.count(const_cast<float*>(p))) return;
  }
  primary_.await_readers(p);
}

size_t FallbackHostAllocator::fallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fallbacks_;
}

std::string FallbackHostAllocator::first_failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_failure_;
}

}  // namespace seqtrain
