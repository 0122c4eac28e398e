// CudaBackend::pinned_allocator: page-locked host memory for the loader's slot buffers, so the
// batch's host-to-device copy is a DMA the copy lane runs beside compute, reading the slot itself
// (PinnedBuffers keeps the slot from being refilled before; pageable memory would be staged). A
// refusal (the locked-memory limit of a container, an exhausted pool) falls back to the heap
// through FallbackHostAllocator: slower copies, same run.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

namespace seqtrain::cuda {
namespace {

class PageLockedAllocator final : public HostAllocator {
 public:
  explicit PageLockedAllocator(int device) : device_(device) {}
  float* allocate(size_t n) override {
    ST_CUDA(cudaSetDevice(device_));
    void* p = nullptr;
    ST_CUDA(cudaHostAlloc(&p, (n == 0 ? 1 : n) * sizeof(float), cudaHostAllocPortable));
    return static_cast<float*>(p);
  }
  void deallocate(float* p, size_t) override { cudaFreeHost(p); }  // never throws: runs in destructors

 private:
  int device_;
};

}  // namespace

HostAllocator* CudaBackend::pinned_allocator() {
  if (!loader_slots_) {
    page_locked_ = std::make_unique<PageLockedAllocator>(device_);
    pinned_buffers_ = std::make_unique<PinnedBuffers>(*page_locked_, *this);
    loader_slots_ = std::make_unique<FallbackHostAllocator>(*pinned_buffers_);
  }
  return loader_slots_.get();
}

}  // namespace seqtrain::cuda
