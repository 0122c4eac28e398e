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
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "backend/backend.h"

namespace seqtrain::testing {

class CaptureBackend final : public Backend {
 public:
  struct Counts {
    size_t captures = 0;  // end_capture calls
    size_t aborted = 0;   // abort_capture calls that ended a capture
    size_t replays = 0;   // replays run
    size_t recorded = 0;  // calls recorded by the last capture
  };

  explicit CaptureBackend(Backend& inner) : inner_(inner) {}
  std::string_view name() const override { return "capture"; }
  bool host_accessible() const override { return true; }
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
  // An Error naming `what` while capturing (what a GPU could not capture either).
  void refuse(const char* what) const;

  Backend& inner_;
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
