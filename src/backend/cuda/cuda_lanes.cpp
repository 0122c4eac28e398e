// CudaBackend's copy lane (backend.h, "The batch's copy lane"; backend/batch_landing.h): the
// batch's copies on a second non-blocking stream, so they run while the compute stream still works
// on the previous step, and lane marks as CUDA events: mark() records one on the lane's stream,
// wait() makes the other stream wait for it (cudaStreamWaitEvent: the host does not), host_wait()
// blocks the calling thread (cudaEventSynchronize; the loader's workers call it before refilling a
// slot a copy reads). Events spin-free (cudaEventBlockingSync): a waiting worker yields its core.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace seqtrain::cuda {

void CudaBackend::upload_async(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "upload_async");
  refuse_while_capturing("an upload");
  if (bytes == 0) return;
  if (pinned_buffers_ && pinned_buffers_->holds(host_src, bytes)) {
    // The loader's page-locked slot itself, by DMA: no staging memcpy. The slot is refilled only
    // once this copy has run (PinnedBuffers::await_readers waits for the mark).
    ST_CUDA(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, copy_stream_));
    pinned_buffers_->read_until(host_src, mark(Lane::copy));
  } else {
    stage_copy(host_src, device_dst, bytes, copy_stream_);
  }
}

Backend::LaneMark CudaBackend::mark(Lane lane) {
  refuse_while_capturing("a lane mark");
  LaneEvents& l = lanes_[static_cast<int>(lane)];
  uint64_t seq = 0;
  cudaEvent_t* ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    seq = ++l.last;
    ev = &l.events[seq % kLaneEvents];
  }
  if (!*ev) {
    ST_CUDA(cudaEventCreateWithFlags(ev, cudaEventDisableTiming | cudaEventBlockingSync));
  } else {
    ST_CUDA(cudaEventSynchronize(*ev));  // mark seq - kLaneEvents, steps old: recorded again below
    std::lock_guard<std::mutex> lock(lanes_mu_);
    l.passed = std::max(l.passed, seq - kLaneEvents);
  }
  ST_CUDA(cudaEventRecord(*ev, lane_stream(lane)));
  return {lane, seq};
}

cudaEvent_t CudaBackend::pending(LaneMark m) {
  if (m.seq == 0) return nullptr;
  const LaneEvents& l = lanes_[static_cast<int>(m.lane)];
  std::lock_guard<std::mutex> lock(lanes_mu_);
  ST_CHECK(m.seq <= l.last, "internal error: {}: a lane mark {} that was never made", name_, m.seq);
  return m.seq <= l.passed ? nullptr : l.events[m.seq % kLaneEvents];
}

void CudaBackend::wait(Lane waiter, LaneMark m) {
  refuse_while_capturing("a wait between lanes");
  if (cudaEvent_t ev = pending(m)) ST_CUDA(cudaStreamWaitEvent(lane_stream(waiter), ev, 0));
}

// From any thread. mark() may record the event again meanwhile, but only after m has run, so this
// waits for m or for a later record of the same lane: never less.
void CudaBackend::host_wait(LaneMark m) {
  if (cudaEvent_t ev = pending(m)) ST_CUDA(cudaEventSynchronize(ev));
}

}  // namespace seqtrain::cuda
