// DeviceBuffer: n f32 elements of one backend's device memory, owned (RAII). It remembers the
// backend that allocated it and gives the memory back to that one, so a buffer can never be
// freed by the wrong backend. Parameters, gradients (nn/params.h) and optimizer state
// (optim/optimizer.h) live in these; every one of them is f32.
//
// data() is a device pointer, for the backend's operations. Host code reads and writes the
// contents through download()/upload() (copies, sizes checked), or through host_view.h, which
// is direct when the backend is host_accessible() and a copy otherwise.
#pragma once
#include <cstddef>
#include <span>

namespace seqtrain {

class Backend;

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // n elements from `backend`, uninitialised unless `zero` (then filled with 0 by the backend).
  DeviceBuffer(Backend& backend, size_t n, bool zero = true);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Backend* backend() const { return backend_; }

  // host -> elements [offset, offset + host.size()); device -> host from element `offset`.
  // A range past the end is an Error naming both sizes.
  void upload(std::span<const float> host, size_t offset = 0);
  void download(std::span<float> host, size_t offset = 0) const;

 private:
  void check_range(size_t offset, size_t count, const char* what) const;
  void reset() noexcept;

  Backend* backend_ = nullptr;
  float* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace seqtrain
