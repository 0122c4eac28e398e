// CaptureBackend: a test-only Backend that captures a step as a GPU does (backend.h, "Capture"),
// so the capture logic of the training step (train/step_graphs.h) is tested without a GPU. Its
// operations run on an inner backend (the CPU one). Between begin_capture and end_capture it runs
// nothing: each operation is recorded as a call with the pointers and host scalars it was given,
// and replay() makes those calls again, in order — as a CUDA graph replays its kernels with the
// arguments of its capture. So a step whose per-step values are not in memory (a baked learning
// rate, a batch read from the loader's slot, a host-side read) replays wrong and the tests see it.
// As on a GPU, what cannot be captured is an Error while capturing: an operation that returns a
// host value, a copy, an allocation or a release, and (here) the recurrent layers, whose kernels
// the CPU backend calls behind the seam; a capture is stale once memory has been released.
// Constructed with a copy lane it is a GPU's two streams as well (backend.h, "The batch's copy
// lane"), for the tests of backend/batch_landing.h: upload_async, marks and waits run at once
// on the inner backend, and each is logged with every operation (lane_log()), so a test reads
// their order; pinned_allocator() hands out buffers that upload_async reads directly
// (backend/pinned_buffers.h), as a GPU reads the loader's page-locked slots, and reads_pending()
// says whether such a read has not been host_wait()ed for yet.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/pinned_buffers.h"

namespace seqtrain::testing {

class CaptureBackend final : public Backend {
 public:
  struct Counts {
    size_t captures = 0;  // end_capture calls
    size_t aborted = 0;   // abort_capture calls that ended a capture
    size_t replays = 0;   // replays run
    size_t recorded = 0;  // calls recorded by the last capture
  };

  // One logged event: a queued operation (op: on the compute lane), a host-side one (host: an
  // allocation, a copy to the host, a value read back), an upload_async (direct: it read a pinned
  // buffer itself), a lane mark, a lane waiting for a mark, or the host waiting for one.
  struct LaneEvent {
    enum Kind { op, host, upload, mark, wait, host_wait } kind = op;
    Lane lane = Lane::compute;  // mark: the lane marked; wait: the lane that waits
    LaneMark m{};               // mark, wait, host_wait: the mark
    const void* src = nullptr;  // upload
    const void* dst = nullptr;
    size_t bytes = 0;
    bool direct = false;
  };

  explicit CaptureBackend(Backend& inner, bool copy_lane = false);
  ~CaptureBackend() override;
  std::string_view name() const override { return "capture"; }
  bool host_accessible() const override { return true; }
  bool has_copy_lane() const override { return copy_lane_; }
  void upload_async(const void* host_src, void* device_dst, size_t bytes) override;
  LaneMark mark(Lane lane) override;
  void wait(Lane waiter, LaneMark m) override;
  void host_wait(LaneMark m) override;  // any thread
  HostAllocator* pinned_allocator() override;
  // The events so far (a copy), and forgetting them.
  std::vector<LaneEvent> lane_log() const;
  void clear_lane_log();
  // Whether a direct upload_async read from [p, p + bytes) has a copy mark the host has not waited for.
  bool reads_pending(const void* p, size_t bytes) const;
  SEQTRAIN_BACKEND_OPERATIONS
  SEQTRAIN_BACKEND_MEMORY
  void upload(const void* host_src, void* device_dst, size_t bytes) override;
  void gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                 const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc) override;
  void activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) override;
  void layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) override;
  void regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                  float delta, double* acc) override;
  void cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) override;
  double quantile_loss_forward(const QuantileArgs& a) override;
  void quantile_loss_backward(const QuantileArgs& a, float k, float* grad) override;
  void monotone_quantiles_forward(const float* raw, float* out, int64_t groups, int64_t levels) override;
  void monotone_quantiles_backward(const float* raw, const float* dout, float* draw, int64_t groups,
                                   int64_t levels) override;
  void masked_max_forward(const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C, float* y,
                          int32_t* arg) override;
  void masked_max_backward(const float* dy, const int32_t* arg, int64_t B, int64_t T, int64_t C, float* dx) override;
  void clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) override;
  void scale_by(float* x, size_t n, const float* s) override;
  void unscale_grads(float* g, size_t n, LossScaleState* st) override;
  void update_loss_scale(LossScaleState* st, const LossScaleRule& rule) override;
  void adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) override;
  void token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) override;
  void dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) override;

  SEQTRAIN_BACKEND_CAPTURE

  const Counts& counts() const { return counts_; }
  size_t live_captures() const { return captures_.size(); }

 private:
  friend class CaptureRecurrentLayers;
  // Runs f now, or records it while capturing.
  void run(std::function<void()> f);
  // An Error naming `what` while capturing (what a GPU could not capture either); logs a host event.
  void refuse(const char* what) const;
  void log(LaneEvent e) const;

  Backend& inner_;
  bool copy_lane_ = false;
  mutable std::mutex log_mu_;  // loader workers host_wait while the step logs
  mutable std::vector<LaneEvent> log_;
  uint64_t marks_[2] = {0, 0};      // by lane: the last mark's seq
  uint64_t host_waited_[2] = {0, 0};  // by lane: the highest seq the host waited for
  std::unique_ptr<HostAllocator> heap_;
  std::unique_ptr<PinnedBuffers> pinned_;
  bool capturing_ = false;
  std::vector<std::function<void()>> recording_;
  struct Capture {
    std::vector<std::function<void()>> calls;
    size_t releases = 0;
  };
  std::map<uint64_t, Capture> captures_;
  uint64_t next_ = 1;
  size_t releases_ = 0;
  Counts counts_;
};

}  // namespace seqtrain::testing
