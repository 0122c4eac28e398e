// PinnedBuffers: the page-locked host buffers a backend hands the loader for its slots
// (Backend::pinned_allocator), and the copies still reading them. A batch's copy on the copy lane
// (Backend::upload_async) reads such a buffer directly, with no staging memcpy, so the buffer must
// not be rewritten until that copy has run: the backend registers each direct read with a copy-lane
// mark after it (read_until), and the loader, before it refills a slot, calls await_readers, which
// host_waits for that mark. The loader's worker waits there, never the step; a slot is refilled
// only once its batch has landed. Buffers the page-locked allocator refused come from the heap
// (FallbackHostAllocator wraps this one), are not held here, and are staged instead.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>

#include "backend/backend.h"

namespace seqtrain {

class PinnedBuffers final : public HostAllocator {
 public:
  // `page_locked` allocates the buffers; `backend` waits for marks. Both must outlive this.
  PinnedBuffers(HostAllocator& page_locked, Backend& backend) : page_locked_(page_locked), backend_(backend) {}
  float* allocate(size_t n) override;
  // After the buffer's readers (freeing memory a copy still reads would let it read anything).
  void deallocate(float* p, size_t n) override;
  void await_readers(const float* p) override;
  // Whether [p, p + bytes) lies inside one of these buffers, so a copy may read it directly.
  bool holds(const void* p, size_t bytes) const;
  // A copy reading the buffer that holds p has been queued: it has run once `m` has passed.
  void read_until(const void* p, Backend::LaneMark m);

 private:
  struct Buffer {
    size_t bytes = 0;
    Backend::LaneMark read{};  // the last direct read's mark (seq 0: none)
  };
  using Buffers = std::map<const char*, Buffer>;  // by first byte
  // The buffer holding [p, p + bytes), or end() (lock held).
  Buffers::iterator find(const void* p, size_t bytes) const;
  // The mark that buffer p's readers have run at, and forgets it (lock taken).
  Backend::LaneMark take_mark(const void* p);

  HostAllocator& page_locked_;
  Backend& backend_;
  mutable std::mutex mu_;
  mutable Buffers buffers_;
};

}  // namespace seqtrain
