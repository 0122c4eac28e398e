// CudaBackend's step without synchronization (cuda_backend.h): the staged upload (the batch's on
// the copy lane, cuda_lanes.cpp, when the step has one; the scalars' on the compute stream), the
// loss accumulators and clipping on the device. Every call only queues work on the stream.
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_core_kernels.h"
#include "backend/cuda/cuda_seam_kernels.h"
#include "backend/cuda/cuda_step_kernels.h"
#include "core/error.h"

namespace seqtrain::cuda {

void CudaBackend::upload(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "upload");
  refuse_while_capturing("an upload (a graph would copy from the staging slot of its capture)");
  if (bytes == 0) return;
  stage_copy(host_src, device_dst, bytes, stream_);
}

void CudaBackend::stage_copy(const void* host_src, void* device_dst, size_t bytes, cudaStream_t stream) {
  Staging& st = staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % kStagingSlots;
  if (st.done) ST_CUDA(cudaEventSynchronize(st.done));  // the copy that last read this slot has run
  else ST_CUDA(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
  if (st.bytes < bytes) {
    if (st.host) ST_CUDA(cudaFreeHost(st.host));
    st.host = nullptr;
    st.bytes = 0;
    ST_CUDA(cudaMallocHost(&st.host, bytes));
    st.bytes = bytes;
  }
  std::memcpy(st.host, host_src, bytes);
  ST_CUDA(cudaMemcpyAsync(device_dst, st.host, bytes, cudaMemcpyHostToDevice, stream));
  ST_CUDA(cudaEventRecord(st.done, stream));
}

void CudaBackend::regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                             float delta, double* acc) {
  if (n == 0) return;
  auto* partials = static_cast<double*>(scratch(sizeof(double) * seam_blocks(n)));
  ST_CUDA(launch_regression_sum(static_cast<int>(kind), pred, target, n, delta, partials, stream()));
  ST_CUDA(launch_add_doubles(acc, partials, 1, stream()));
}

void CudaBackend::clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) {
  const auto len = static_cast<int64_t>(n);
  if (n == 0) {
    ST_CHECK(!skip, "internal error: clipping an empty gradient buffer under a skip flag");
    const double zero = 0;
    copy_from_host(&zero, norm, sizeof zero);
    return;
  }
  void* partials = scratch(sum_squares_scratch_bytes(len));
  ST_CUDA(launch_sum_squares(g, len, partials, stream_));
  ST_CUDA(launch_clip_by_norm(sum_squares_result(partials, len), norm, g, len, max_norm, skip, stream_));
}

void CudaBackend::scale_by(float* x, size_t n, const float* s) {
  if (n == 0) return;
  ST_CUDA(launch_scale_by(x, static_cast<int64_t>(n), s, stream_));
}

void CudaBackend::unscale_grads(float* g, size_t n, LossScaleState* st) {
  ST_CUDA(launch_unscale_grads(g, static_cast<int64_t>(n), st, stream_));
}

void CudaBackend::update_loss_scale(LossScaleState* st, const LossScaleRule& rule) {
  ST_CUDA(launch_update_loss_scale(st, rule, stream_));
}

void CudaBackend::adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) {
  if (count == 0 && !(skip && skips)) return;
  ST_CUDA(launch_adamw_prepare(steps, static_cast<int64_t>(count), skip, skips, stream_));
}

// The flag the kernel lowers goes to scratch and is not read: the host checked every id.
void CudaBackend::token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  ST_CHECK(from == DType::f32 || from == DType::i64, "token ids: values must be f32 or i64, got {}",
           dtype_name(from));
  if (n == 0) return;
  auto* flag = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  ST_CUDA(launch_token_ids(from == DType::f32, x, ids, n, vocab, flag, stream()));
}

}  // namespace seqtrain::cuda
