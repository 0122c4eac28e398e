// ReferenceBackend's memory: plain operator new (malloc's alignment, 16 bytes), deliberately not
// the CPU backend's aligned allocator, so the memory seam is exercised by two different paths.
// Host memory: copies are plain loops, and host code may use it directly.
#include <new>

#include "backend/reference/reference_backend.h"

namespace seqtrain {

void* ReferenceBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = ::operator new(bytes);
  allocations_.add(p, bytes);
  return p;
}

void ReferenceBackend::release(void* p) {
  if (!p) return;
  allocations_.remove(p, name());
  ::operator delete(p);
}

void ReferenceBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  allocations_.check_range(device_src, bytes, name(), "copy_to_host");
  const auto* s = static_cast<const unsigned char*>(device_src);
  auto* d = static_cast<unsigned char*>(host_dst);
  for (size_t i = 0; i < bytes; ++i) d[i] = s[i];
}

void ReferenceBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "copy_from_host");
  const auto* s = static_cast<const unsigned char*>(host_src);
  auto* d = static_cast<unsigned char*>(device_dst);
  for (size_t i = 0; i < bytes; ++i) d[i] = s[i];
}

}  // namespace seqtrain
