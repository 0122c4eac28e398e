// CudaBackend's context and memory: the device, its one stream, the cuBLASLt and cuDNN handles,
// the GEMM workspace, the scratch and pinned buffers the kernels and read-backs share, device
// allocations kept in an AllocationTable (so a foreign pointer or a copy past a buffer's end is
// an Error, as on the host backends), and which operations this backend has. The operations
// themselves live in cuda_gemm.cpp, cuda_ops.cpp and the other files cuda_backend.h lists.
#include <fmt/format.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

// cuBLASLt picks faster kernels (split-K, larger tiles) when it may use a workspace; 32 MiB is
// what NVIDIA recommends for Hopper and is nothing next to a model's activations.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// Scratch and pinned buffers grow to the next multiple of this, so a sequence of slightly
// larger requests does not reallocate (and synchronize) each time.
constexpr size_t kGrowQuantum = size_t{1} << 20;

size_t grown(size_t bytes) { return (bytes + kGrowQuantum - 1) / kGrowQuantum * kGrowQuantum; }

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device), name_(fmt::format("cuda:{}", device)) {
  try {
    ST_CUDA(cudaSetDevice(device_));
    // Non-blocking: the legacy default stream (which other libraries may use) does not
    // serialize against this one.
    ST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ST_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));  // the batch's copy lane
    ST_CUBLAS(cublasLtCreate(&lt_));
    ST_CUDNN(cudnnCreate(&dnn_));
    ST_CUDNN(cudnnSetStream(dnn_, stream_));
    ST_CUDA(cudaMalloc(&gemm_workspace_, kGemmWorkspaceBytes));
    gemm_workspace_bytes_ = kGemmWorkspaceBytes;
  } catch (...) {
    destroy();  // the destructor does not run for a constructor that throws
    throw;
  }
}

CudaBackend::~CudaBackend() { destroy(); }

// Return codes are ignored on purpose: the backends live until exit (plugin_entry.cpp), when the
// static CUDA runtime may already be unloading (cudaErrorCudartUnloading) and nothing can be
// reported or fixed. The device buffers of allocations_ are the caller's; the driver reclaims
// them with the context.
void CudaBackend::destroy() noexcept {
  for (const auto& [id, g] : graphs_) (void)cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  gemm_cache_.reset();
  for (Staging& st : staging_) {
    if (st.done) (void)cudaEventDestroy(st.done);
    if (st.host) (void)cudaFreeHost(st.host);
    st = Staging{};
  }
  if (pinned_) (void)cudaFreeHost(pinned_);
  if (scratch_) (void)cudaFree(scratch_);
  if (gemm_workspace_) (void)cudaFree(gemm_workspace_);
  if (dnn_) (void)cudnnDestroy(dnn_);
  if (lt_) (void)cublasLtDestroy(lt_);
  for (LaneEvents& l : lanes_)
    for (cudaEvent_t& ev : l.events) {
      if (ev) (void)cudaEventDestroy(ev);
      ev = nullptr;
    }
  if (copy_stream_) (void)cudaStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
  if (stream_) (void)cudaStreamDestroy(stream_);
  pinned_ = scratch_ = gemm_workspace_ = nullptr;
  pinned_bytes_ = scratch_bytes_ = gemm_workspace_bytes_ = 0;
  dnn_ = nullptr;
  lt_ = nullptr;
  stream_ = nullptr;
}

bool CudaBackend::supports(BackendOp op) const {
  switch (op) {
    case BackendOp::rnn_grad_checkpoint:
      return false;
    case BackendOp::half_output:
    case BackendOp::gemm_f32: case BackendOp::gemm_bf16: case BackendOp::gemm_f16:
    case BackendOp::bias: case BackendOp::rnn_fp32: case BackendOp::rnn_bf16: case BackendOp::rnn_fp16:
    case BackendOp::adamw: case BackendOp::sgd: case BackendOp::norm: case BackendOp::scale:
    case BackendOp::fill: case BackendOp::copy: case BackendOp::activation:
    case BackendOp::attention_f32: case BackendOp::attention_bf16:
    case BackendOp::cross_entropy: case BackendOp::layer_norm: case BackendOp::embedding:
    case BackendOp::dropout: case BackendOp::axpy: case BackendOp::transpose:
    case BackendOp::regression_loss: case BackendOp::token_ids: case BackendOp::conv1d:
    case BackendOp::batch_norm:
      return true;
  }
  return false;
}

// ---- scratch, pinned, synchronize ---------------------------------------------------------------

// A buffer that only grows: growing frees the old one, which kernels or copies queued earlier may
// still be using, so it waits for them first (growth is rare: sizes settle after the first step).
void* CudaBackend::grow(void*& buf, size_t& have, size_t bytes, bool host) {
  if (bytes <= have && buf) return buf;
  refuse_while_capturing("a scratch buffer grows");
  synchronize();
  if (buf) ST_CUDA(host ? cudaFreeHost(buf) : cudaFree(buf));
  if (buf && !host) ++releases_;  // a captured graph may read the old one
  buf = nullptr;
  have = 0;
  const size_t want = grown(bytes == 0 ? 1 : bytes);
  ST_CUDA(host ? cudaMallocHost(&buf, want) : cudaMalloc(&buf, want));
  have = want;
  return buf;
}

void* CudaBackend::scratch(size_t bytes) { return grow(scratch_, scratch_bytes_, bytes, false); }

void* CudaBackend::pinned(size_t bytes) { return grow(pinned_, pinned_bytes_, bytes, true); }

void CudaBackend::synchronize() { ST_CUDA(cudaStreamSynchronize(stream_)); }

// ---- memory ---------------------------------------------------------------------------------------

// cudaMalloc aligns to 256 bytes, beyond kDeviceAlignment and what cuBLASLt's fastest kernels
// want for a whole buffer.
void* CudaBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  refuse_while_capturing("an allocation");
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // the runtime keeps the error sticky until read
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    constexpr double kMiB = 1024.0 * 1024.0;
    fail("{} is out of memory: {:.0f} MiB more were asked for, {:.0f} MiB of {:.0f} MiB are free. Fix: a smaller "
         "train.batch_size (or model, or model.lookback / data.block_size), train.grad_checkpoint: true, or "
         "runtime.device: cpu",
         name_, bytes / kMiB, free_bytes / kMiB, total_bytes / kMiB);
  }
  ST_CUDA(e);
  allocations_.add(p, bytes);
  return p;
}

size_t CudaBackend::device_free_bytes() {
  ST_CUDA(cudaSetDevice(device_));  // cudaMemGetInfo answers for the current device
  size_t free_bytes = 0, total_bytes = 0;
  ST_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

// The table first: a foreign pointer or a second release is an Error before anything is freed.
// cudaFree waits for the device, so work still queued on the buffer finishes first.
void CudaBackend::release(void* p) {
  if (!p) return;
  refuse_while_capturing("a release");
  allocations_.remove(p, name());
  ST_CUDA(cudaFree(p));
  ++releases_;  // a captured graph may read it
}

void CudaBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  allocations_.check_range(device_src, bytes, name(), "copy_to_host");
  refuse_while_capturing("a copy to the host");
  if (bytes == 0) return;
  ST_CUDA(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
  synchronize();
}

// Synchronized before returning: from pageable memory CUDA stages the bytes before the call
// returns, but from pinned memory (a loader's page-locked slot) the copy is truly asynchronous,
// and the contract lets the caller reuse its buffer at once. Host-to-device copies are rare
// (loading parameters, a batch per step), so the wait costs little.
void CudaBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  allocations_.check_range(device_dst, bytes, name(), "copy_from_host");
  refuse_while_capturing("a copy from the host");
  if (bytes == 0) return;
  ST_CUDA(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  synchronize();
}

}  // namespace seqtrain::cuda
