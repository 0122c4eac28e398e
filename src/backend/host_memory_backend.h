// HostMemoryBackend: the memory half of a Backend whose device memory is the host's (cpu and
// reference): allocate/release through operator new at the alignment the backend asks for,
// copies are memcpy, host code may use the memory directly (host_accessible). Every buffer is
// kept in an AllocationTable, so a buffer released by the wrong backend or twice, or a copy past
// a buffer's end, is an Error naming the backend. A device backend (CUDA) implements the memory
// functions of backend.h itself instead.
#pragma once
#include "backend/allocation_table.h"
#include "backend/backend.h"

namespace seqtrain {

class HostMemoryBackend : public Backend {
 public:
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void copy_to_host(const void* device_src, void* host_dst, size_t bytes) override;
  void copy_from_host(const void* host_src, void* device_dst, size_t bytes) override;
  bool host_accessible() const override { return true; }
  // The activation ops as backend/seam_loops.h's host loops (threaded when threaded_loops()).
  SEQTRAIN_BACKEND_ACTIVATION_OPS
  void add(const float* a, const float* b, float* out, size_t n) override;  // one pass
  const AllocationTable& allocations() const { return allocations_; }

 protected:
  // The alignment of a buffer of `bytes`; 0: operator new's own (16 bytes).
  virtual size_t alignment_for(size_t bytes) const { (void)bytes; return 0; }
  // Whether the elementwise activation loops use OpenMP threads (the CPU backend's do; the
  // reference backend stays serial, as every one of its ops).
  virtual bool threaded_loops() const { return false; }

 private:
  AllocationTable allocations_;
};

}  // namespace seqtrain
