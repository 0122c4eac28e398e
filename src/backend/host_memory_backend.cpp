#include "backend/host_memory_backend.h"

#include <cstring>
#include <new>

#include "backend/seam_loops.h"

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

// The activation ops: backend/seam_loops.h's loops, for every backend whose memory is the host's.
void HostMemoryBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  axpy_loop(alpha, x, y, n, threaded_loops());
}

void HostMemoryBackend::add(const float* a, const float* b, float* out, size_t n) {
  add_loop(a, b, out, n, threaded_loops());
}

void HostMemoryBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  transpose_loop(x, y, A, B, C, threaded_loops());
}

double HostMemoryBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target,
                                                  int64_t n, float delta) {
  return regression_sum_loop(kind, pred, target, n, delta);
}

void HostMemoryBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target,
                                                 int64_t n, float delta, float k, float* grad) {
  regression_grad_loop(kind, pred, target, n, delta, k, grad);
}

int64_t HostMemoryBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  return token_ids_loop(from, x, ids, n, vocab);
}

void HostMemoryBackend::im2col_1d(const Conv1dArgs& a, const float* x, float* cols) {
  im2col_1d_loop(a, x, cols, threaded_loops());
}

void HostMemoryBackend::col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) {
  col2im_1d_loop(a, dcols, dx, threaded_loops());
}

void HostMemoryBackend::batch_norm_forward(const BatchNormArgs& a, float* y) {
  batch_norm_forward_loop(a, y, threaded_loops());
}

void HostMemoryBackend::batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight,
                                            float* dbias) {
  batch_norm_backward_loop(a, dy, dx, dweight, dbias, threaded_loops());
}

}  // namespace seqtrain
