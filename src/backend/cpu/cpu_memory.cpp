// CpuBackend's memory: host memory, so copies are memcpy and host code may use it directly.
// Buffers are aligned to a cache line (64 bytes, one AVX-512 register), so kernels may use
// aligned loads and no buffer shares its first line with another object; buffers of 1 MiB and
// more start on a page, so a large buffer shares no page with the rest of the heap.
#include <cstring>
#include <new>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace seqtrain {
namespace {
constexpr size_t kLineAlign = 64, kPageAlign = 4096, kPageAlignFrom = size_t{1} << 20;

size_t alignment_for(size_t bytes) { return bytes >= kPageAlignFrom ? kPageAlign : kLineAlign; }
}  // namespace

void* CpuBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = ::operator new(bytes, std::align_val_t{alignment_for(bytes)});
  allocations_.add(p, bytes);
  return p;
}

void CpuBackend::release(void* p) {
  if (!p) return;
  const size_t bytes = allocations_.remove(p, name());
  ::operator delete(p, std::align_val_t{alignment_for(bytes)});
}

void CpuBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  allocations_.check_range(device_src, bytes, name(), "copy_to_host");
  if (bytes) std::memcpy(host_dst, device_src, bytes);
}

void CpuBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "copy_from_host");
  if (bytes) std::memcpy(device_dst, host_src, bytes);
}

}  // namespace seqtrain
