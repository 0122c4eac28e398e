// CudaBackend: the Backend seam on one NVIDIA GPU (backend.h states every operation's contract;
// the reference backend is the oracle the tests hold it to). Device memory from cudaMalloc
// (host_accessible() false: host code reaches parameters only through the copies, nn/params.h),
// every operation queued on the backend's compute stream in call order (a training step's batch
// copies on a second stream, the copy lane, ordered by events); GEMMs on cuBLASLt (fp32 with
// TF32 when the precision policy allows it, bf16 and fp16 operands with fp32 accumulation),
// recurrent layers on cuDNN's RNN API (cuda_rnn.cu), attention as cuBLASLt batched GEMMs around
// seqtrain's row kernels (cuda_attention_gemm.cu) or, where that path's scratch would be too
// large or SEQTRAIN_CUDA_ATTENTION=tiles asks, seqtrain's own FlashAttention kernels
// (cuda_attention.cu), the row ops, activations, AdamW/SGD and norms as seqtrain's own kernels
// over the flat buffers (cuda_rows.cu, cuda_elementwise.cu, cuda_optim.cu).
//
// Files: cuda_backend.cpp (context, memory, supports), cuda_gemm.cpp (GEMM on cuBLASLt),
// cuda_ops.cpp (convert, bias, AdamW/SGD, norm, fill/copy/scale, activations; kernels in
// cuda_elementwise.cu and cuda_optim.cu), cuda_rows.cu (cross-entropy, LayerNorm, embedding,
// dropout), cuda_attention.cpp (the two attention paths and the choice between them; kernels in
// cuda_attention.cu and cuda_attention_gemm.cu), cuda_rnn.cu (make_recurrent), cuda_pinned.cpp
// (the loader's page-locked slots), cuda_lanes.cpp (the batch's copy lane), cuda_capture.cpp (a
// step as a CUDA graph), plugin_entry.cpp (the plugin's C entry points).
//
// Operations that return a host value (l2_norm, cross_entropy_forward's sums) synchronize the
// stream to read it; everything else is asynchronous on the stream.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/allocation_table.h"
#include "backend/backend.h"
#include "backend/pinned_buffers.h"

namespace seqtrain::cuda {

class CudaBackend final : public Backend {
 public:
  // Makes `device` current and creates the stream, the cuBLASLt and cuDNN handles and the GEMM
  // workspace; Error (with the CUDA message) when any of it fails.
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return name_; }
  SEQTRAIN_BACKEND_OPERATIONS
  SEQTRAIN_BACKEND_MEMORY
  bool host_accessible() const override { return false; }
  // Page-locked slots for the loader (cudaHostAlloc), heap memory where the driver refuses
  // (cuda_pinned.cpp).
  HostAllocator* pinned_allocator() override;
  // cudaMemGetInfo's free bytes of this backend's GPU.
  size_t device_free_bytes() override;
  // The step's batch and scalars without a synchronization (cuda_step.cpp): upload stages the
  // bytes in a ring of page-locked buffers and copies asynchronously; the accumulators and the
  // clipping are kernels on the stream.
  void upload(const void* host_src, void* device_dst, size_t bytes) override;
  // The batch's copy lane (cuda_lanes.cpp): a second non-blocking stream beside the compute
  // stream, events as lane marks; a copy from the loader's page-locked slots reads them directly.
  bool has_copy_lane() const override { return true; }
  void upload_async(const void* host_src, void* device_dst, size_t bytes) override;
  LaneMark mark(Lane lane) override;
  void wait(Lane waiter, LaneMark m) override;
  void host_wait(LaneMark m) override;
  // Dropout keyed by a shard's offset in the global mask (a data-parallel rank's rows).
  void dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) override;
  void regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                  float delta, double* acc) override;
  void cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) override;
  void clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) override;
  void scale_by(float* x, size_t n, const float* s) override;
  void unscale_grads(float* g, size_t n, LossScaleState* st) override;
  void update_loss_scale(LossScaleState* st, const LossScaleRule& rule) override;
  void adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) override;
  void token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) override;
  // Capture (cuda_capture.cpp): the stream captured into a CUDA graph, instantiated and kept by
  // handle. Thread-local capture mode, so an unsafe call of this thread (cudaMalloc, a
  // synchronization) fails the capture with CUDA's reason instead of being recorded.
  SEQTRAIN_BACKEND_CAPTURE
  // Outputs rounded to bf16 / fp16 as they are written (the input of a 16-bit Linear).
  void activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) override;
  void layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) override;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return lt_; }
  cudnnHandle_t cudnn() const { return dnn_; }
  // Whether fp32 GEMMs may use TF32 tensor cores. Off by default, as PyTorch's
  // torch.backends.cuda.matmul.allow_tf32 since 1.12: runtime.precision fp32 means fp32's numbers
  // (a CUDA run within 1e-3 of the CPU's); bf16 / fp16 are the fast choices.
  bool tf32() const { return tf32_; }
  void set_tf32(bool on) { tf32_ = on; }
  // A device buffer of at least `bytes` kept by the backend for kernels' temporaries (reduction
  // partials, flags); valid until the next call that asks for scratch. Grows, never shrinks.
  void* scratch(size_t bytes);
  // Pinned host memory of at least `bytes` for reading small results back (a loss sum, a norm).
  void* pinned(size_t bytes);
  // Blocks until every operation queued so far has finished (and surfaces its error).
  void synchronize();

 private:
  int device_ = 0;
  std::string name_;  // "cuda:N"
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  void* gemm_workspace_ = nullptr;
  size_t gemm_workspace_bytes_ = 0;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  bool tf32_ = false;
  AllocationTable allocations_;
  // upload()'s staging ring: a slot is refilled only once the copy that last read it has run
  // (its event), so up to kStagingSlots uploads (a few steps' batches) are in flight.
  struct Staging {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  static constexpr int kStagingSlots = 8;
  Staging staging_[kStagingSlots];
  int next_staging_ = 0;
  // host_src through the next staging slot, copied on `stream` (the compute or the copy lane).
  void stage_copy(const void* host_src, void* device_dst, size_t bytes, cudaStream_t stream);
  // The copy lane. Mark seq s of a lane is recorded into its events[s % kLaneEvents]; before an
  // event is recorded again the host waits for its last record (a mark kLaneEvents marks old,
  // steps back), so every seq up to `passed` has run and a recycled event never loses one.
  static constexpr uint64_t kLaneEvents = 32;
  struct LaneEvents {
    cudaEvent_t events[kLaneEvents] = {};
    uint64_t last = 0;    // the last seq marked
    uint64_t passed = 0;  // every seq up to this one has run
  };
  cudaStream_t copy_stream_ = nullptr;
  LaneEvents lanes_[2];  // by Lane
  std::mutex lanes_mu_;  // loader workers host_wait while the step marks
  cudaStream_t lane_stream(Lane lane) const { return lane == Lane::copy ? copy_stream_ : stream_; }
  // m's event, or null when m has run (lock taken).
  cudaEvent_t pending(LaneMark m);
  // The instantiated graphs by handle, each with the release count at its capture: device memory
  // freed since (release(), a scratch buffer grown) may be what the graph reads, so replay
  // refuses it. capturing_ turns the calls that cannot be captured into Errors that say so.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t releases = 0;
  };
  std::map<uint64_t, Graph> graphs_;
  uint64_t next_graph_ = 1;
  uint64_t releases_ = 0;
  bool capturing_ = false;
  void refuse_while_capturing(const char* what) const;
  std::unique_ptr<HostAllocator> page_locked_;      // cudaHostAlloc / cudaFreeHost
  std::unique_ptr<PinnedBuffers> pinned_buffers_;   // page_locked_'s buffers and their copies
  std::unique_ptr<FallbackHostAllocator> loader_slots_;  // pinned_buffers_, or the heap when refused

  // The cuBLASLt plans (descriptors, layouts, chosen algorithm) by GEMM shape, so that a
  // steady-state step creates nothing (cuda_gemm.cpp).
  struct GemmCache;
  struct GemmCacheDeleter {
    void operator()(GemmCache* c) const noexcept;
  };
  std::unique_ptr<GemmCache, GemmCacheDeleter> gemm_cache_;

  // Strided-batched row-major GEMM (cuda_gemm.cpp) for the attention path: for each of `batch`
  // problems b, C_b = alpha op(A_b) op(B_b) + beta C_b with X_b = X + b * stride_x (elements),
  // operands as gemm()'s `in` (fp32 under the same TF32 policy, or bf16 / fp16), C fp32; plans
  // cached with gemm()'s. Sizes must be positive. Not part of the Backend interface.
  void gemm_batched(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                    int64_t lda, int64_t stride_a, const void* B, int64_t ldb, int64_t stride_b, float beta, float* C,
                    int64_t ldc, int64_t stride_c, int64_t batch);
  // The GEMM attention path (cuda_attention.cpp): attention_forward / attention_backward with
  // the score matrices in scratch and the products on cuBLASLt; `a` already checked.
  void attention_forward_gemm(const AttentionCall& a);
  void attention_backward_gemm(const AttentionCall& a, const float* dy, float* dqkv);

  // Frees everything the constructor made; safe on a half-built backend and after the CUDA
  // runtime has been torn down at exit (errors are ignored: there is nobody left to tell).
  void destroy() noexcept;
  // scratch() and pinned(): buf grown to at least `bytes` (device or page-locked host memory).
  void* grow(void*& buf, size_t& have, size_t bytes, bool host);
};

// The plugin's backend of GPU `device`, made at the first call and kept for the process (one per
// GPU, shared by the backend entry and NCCL's: plugin_entry.cpp).
CudaBackend& plugin_backend(int device);

}  // namespace seqtrain::cuda
