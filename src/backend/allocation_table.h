// AllocationTable: the live allocations of one backend, so that its release() and its host
// copies can tell its own device memory from anything else. A pointer another backend (or
// nobody) allocated, a second release of the same buffer, or a copy that runs past the end of a
// buffer is a seqtrain::Error naming the backend, never undefined behaviour. Allocations are
// rare (parameters, gradients and optimizer state: a handful per run, none per step), so a
// locked ordered map costs nothing that matters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>

namespace seqtrain {

class AllocationTable {
 public:
  // Records [p, p + bytes) as a live allocation (p not null).
  void add(void* p, size_t bytes);
  // Forgets p and returns its size; Error when p is not a live allocation of this table.
  size_t remove(void* p, std::string_view backend);
  // Error unless [p, p + bytes) lies inside one live allocation. `what` names the caller
  // ("copy_to_host") for the message.
  void check_range(const void* p, size_t bytes, std::string_view backend, std::string_view what) const;
  size_t live_count() const;
  size_t live_bytes() const;

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> live_;  // start address -> size in bytes
};

}  // namespace seqtrain
