#include "backend/allocation_table.h"

#include "core/error.h"

namespace seqtrain {

void AllocationTable::add(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[reinterpret_cast<uintptr_t>(p)] = bytes;
}

size_t AllocationTable::remove(void* p, std::string_view backend) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(p));
  ST_CHECK(it != live_.end(),
           "the {} backend was asked to release buffer {} which it did not allocate (or released already): "
           "device memory must go back to the backend that allocated it (DeviceBuffer remembers which)",
           backend, p);
  const size_t bytes = it->second;
  live_.erase(it);
  return bytes;
}

void AllocationTable::check_range(const void* p, size_t bytes, std::string_view backend, std::string_view what) const {
  if (bytes == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(a);  // the first allocation starting after p; the one before may hold it
  const bool inside = it != live_.begin() && (--it, a - it->first <= it->second && bytes <= it->second - (a - it->first));
  ST_CHECK(inside,
           "{} on the {} backend: {} bytes at {} are not inside one of its live buffers (a size mismatch, a "
           "pointer of another backend, or a released buffer)",
           what, backend, bytes, p);
}

size_t AllocationTable::live_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

size_t AllocationTable::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [p, bytes] : live_) n += bytes;
  return n;
}

}  // namespace seqtrain
