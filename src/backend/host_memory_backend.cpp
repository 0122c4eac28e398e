#include "backend/host_memory_backend.h"

#include <cstring>
#include <new>

namespace seqtrain {

void* HostMemoryBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t align = alignment_for(bytes);
  void* p = align ? ::operator new(bytes, std::align_val_t{align}) : ::operator new(bytes);
  allocations_.add(p, bytes);
  return p;
}

void HostMemoryBackend::release(void* p) {
  if (!p) return;
  const size_t align = alignment_for(allocations_.remove(p, name()));
  if (align) ::operator delete(p, std::align_val_t{align});
  else ::operator delete(p);
}

void HostMemoryBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  allocations_.check_range(device_src, bytes, name(), "copy_to_host");
  if (bytes) std::memcpy(host_dst, device_src, bytes);
}

void HostMemoryBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "copy_from_host");
  if (bytes) std::memcpy(device_dst, host_src, bytes);
}

}  // namespace seqtrain
