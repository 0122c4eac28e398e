// Helpers for the CUDA backend's tests: the GPU backend or a printed skip, and typed arrays in a
// backend's device memory filled from and read back into host vectors. The tests reach the GPU
// only through the Backend interface (this binary has no CUDA headers or libraries: the backend
// is the plugin, backend/cuda_plugin.h), and hold every operation to the reference backend.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda_plugin.h"

namespace seqtrain::testing {

// The CUDA backend of GPU 0, or null when this machine cannot run it (the reason is in
// cuda_availability().why_none). Use through SEQTRAIN_CUDA_OR_SKIP.
inline Backend* cuda_backend_if_any() {
  return cuda_availability().devices > 0 ? &cuda_backend(0) : nullptr;
}

// Declares `Backend& var` as the GPU backend, or skips the test with the reason printed.
#define SEQTRAIN_CUDA_OR_SKIP(var)                                                                 \
  Backend* var##_ptr_ = ::seqtrain::testing::cuda_backend_if_any();                                \
  if (!var##_ptr_) GTEST_SKIP() << "no usable CUDA GPU: " << ::seqtrain::cuda_availability().why_none; \
  Backend& var = *var##_ptr_

// n elements of T in `backend`'s memory (RAII), uploaded from / downloaded to host vectors.
template <class T>
class DeviceArray {
 public:
  DeviceArray(Backend& backend, size_t n) : backend_(backend), n_(n) {
    p_ = static_cast<T*>(backend_.allocate(n * sizeof(T)));
  }
  DeviceArray(Backend& backend, const std::vector<T>& host) : DeviceArray(backend, host.size()) { upload(host); }
  ~DeviceArray() { backend_.release(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() { return p_; }
  const T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), n_);
    if (n_) backend_.copy_from_host(host.data(), p_, n_ * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) backend_.copy_to_host(p_, host.data(), n_ * sizeof(T));
    return host;
  }

 private:
  Backend& backend_;
  size_t n_;
  T* p_ = nullptr;
};

}  // namespace seqtrain::testing
