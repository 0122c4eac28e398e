#include "backend/device_buffer.h"

#include <utility>

#include "backend/backend.h"
#include "core/error.h"

namespace seqtrain {

DeviceBuffer::DeviceBuffer(Backend& backend, size_t n, bool zero) : backend_(&backend), n_(n) {
  data_ = static_cast<float*>(backend.allocate(n * sizeof(float)));
  ST_CHECK(n == 0 || data_, "the {} backend returned no memory for {} floats", backend.name(), n);
  if (zero && n) backend.fill(data_, n, 0.f);
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : backend_(std::exchange(o.backend_, nullptr)), data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = std::exchange(o.backend_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

// The buffer's own backend allocated data_, so release() cannot refuse it: a throw here would
// mean the backend's bookkeeping is broken, and ending the process (noexcept) is the right answer.
void DeviceBuffer::reset() noexcept {
  if (data_) backend_->release(data_);
  data_ = nullptr;
  n_ = 0;
}

void DeviceBuffer::check_range(size_t offset, size_t count, const char* what) const {
  ST_CHECK(offset <= n_ && count <= n_ - offset,
           "{} of {} floats at element {} does not fit a device buffer of {} floats (on the {} backend)", what,
           count, offset, n_, backend_ ? backend_->name() : std::string_view("no"));
}

void DeviceBuffer::upload(std::span<const float> host, size_t offset) {
  check_range(offset, host.size(), "upload");
  if (!host.empty()) backend_->copy_from_host(host.data(), data_ + offset, host.size_bytes());
}

void DeviceBuffer::download(std::span<float> host, size_t offset) const {
  check_range(offset, host.size(), "download");
  if (!host.empty()) backend_->copy_to_host(data_ + offset, host.data(), host.size_bytes());
}

}  // namespace seqtrain
