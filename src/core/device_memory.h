// DeviceMemory: what an Arena needs of a device to keep activations there: allocate, release,
// zero and whether host code may touch the memory. backend/backend.h's Backend is one; the
// interface lives in core so that the arena (core) does not depend on the backend layer above it.
#pragma once
#include <cstddef>

namespace seqtrain {

// Every allocate() aligns to at least this (a 16-byte vector load, as malloc does).
inline constexpr size_t kDeviceAlignment = 16;

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` bytes, uninitialised, aligned to at least kDeviceAlignment; null for 0 bytes.
  virtual void* allocate(size_t bytes) = 0;
  // Frees what allocate() returned; anything else is an Error. Null is ignored.
  virtual void release(void* p) = 0;
  // True when host code may read and write the memory directly.
  virtual bool host_accessible() const = 0;
  // Sets `bytes` bytes from p (inside one allocation, a multiple of 4 bytes) to zero bits.
  virtual void zero(void* p, size_t bytes) = 0;
};

}  // namespace seqtrain
