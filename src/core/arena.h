// Arena: bump allocator for activations and workspaces.
// The first training step sizes it; later steps reset() and carve the same blocks again, so the
// steady-state step makes no system allocation. os_allocations() counts real allocations so a
// test can prove that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace seqtrain {

class Arena {
 public:
  static constexpr size_t kAlign = 64;

  // Host memory (operator new's aligned allocation), as every arena had before the device seam.
  Arena() = default;
  // Chunks from `memory`'s allocate() (a Backend: activations live where the model's parameters
  // do, so a device backend gets device pointers and host code must reach them through its
  // operations).
  explicit Arena(DeviceMemory& memory) : backend_(&memory) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();
  // Chooses the backend before the first allocation (members built before their model's backend
  // is known); an Error once chunks exist.
  void set_backend(DeviceMemory& memory);
  DeviceMemory* memory() const { return backend_; }  // null: host memory
  // Whether host code may read and write what alloc() returns.
  bool host_accessible() const;

  // Memory is uninitialised; zeros() is the variant that clears it.
  void* alloc(size_t bytes);
  Tensor tensor(Shape shape, DType t = DType::f32);
  Tensor zeros(Shape shape, DType t = DType::f32);

  // Forget every block handed out. If the last cycle overflowed into extra chunks, they are
  // merged into one chunk big enough for the whole cycle (one allocation, then none).
  void reset();
  // reset(), then write every page once, so that the next cycle takes no page faults (the
  // autotuner times candidates in an arena and must not charge one of them for first touches).
  void prefault();

  size_t used() const { return used_; }
  size_t capacity() const;
  size_t high_water() const { return high_water_; }
  static uint64_t os_allocations();

 private:
  struct Chunk { std::byte* mem = nullptr; size_t size = 0; size_t top = 0; };
  void add_chunk(size_t bytes);
  void free_chunk(Chunk& c);
  void clear_chunks();
  DeviceMemory* backend_ = nullptr;  // null: host memory
  std::vector<Chunk> chunks_;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace seqtrain
