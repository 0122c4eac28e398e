#include "backend/pinned_buffers.h"

#include <functional>
#include <utility>

namespace seqtrain {

float* PinnedBuffers::allocate(size_t n) {
  float* p = page_locked_.allocate(n);  // throws when refused: FallbackHostAllocator takes the heap
  std::lock_guard<std::mutex> lock(mu_);
  buffers_[reinterpret_cast<const char*>(p)] = Buffer{.bytes = (n == 0 ? 1 : n) * sizeof(float)};
  return p;
}

void PinnedBuffers::deallocate(float* p, size_t n) {
  await_readers(p);
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.erase(reinterpret_cast<const char*>(p));
  }
  page_locked_.deallocate(p, n);
}

PinnedBuffers::Buffers::iterator PinnedBuffers::find(const void* p, size_t bytes) const {
  const auto* c = static_cast<const char*>(p);
  auto it = buffers_.upper_bound(c);
  if (it == buffers_.begin()) return buffers_.end();
  --it;
  // The comparisons as std::less, which orders unrelated pointers too.
  const std::less<const char*> before;
  return !before(it->first + it->second.bytes, c + bytes) ? it : buffers_.end();
}

bool PinnedBuffers::holds(const void* p, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return find(p, bytes) != buffers_.end();
}

void PinnedBuffers::read_until(const void* p, Backend::LaneMark m) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = find(p, 1);
  if (it != buffers_.end()) it->second.read = m;
}

Backend::LaneMark PinnedBuffers::take_mark(const void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = find(p, 1);
  if (it == buffers_.end()) return {};
  return std::exchange(it->second.read, Backend::LaneMark{});
}

// Outside the lock: the step registers its next reads while a worker waits here.
void PinnedBuffers::await_readers(const float* p) {
  const Backend::LaneMark m = take_mark(p);
  if (m.seq != 0) backend_.host_wait(m);
}

}  // namespace seqtrain
