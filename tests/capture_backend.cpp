#include "capture_backend.h"

#include "core/error.h"

#include <algorithm>

namespace seqtrain::testing {

namespace {

// The "page-locked" memory of a backend without pages to lock: the heap.
struct HeapAllocator final : HostAllocator {
  float* allocate(size_t n) override { return new float[n == 0 ? 1 : n]; }
  void deallocate(float* p, size_t) override { delete[] p; }
};

}  // namespace

CaptureBackend::CaptureBackend(Backend& inner, bool copy_lane) : inner_(inner), copy_lane_(copy_lane) {}

CaptureBackend::~CaptureBackend() = default;

void CaptureBackend::run(std::function<void()> f) {
  if (!capturing_) log({.kind = LaneEvent::op});
  if (capturing_) recording_.push_back(std::move(f));
  else f();
}

void CaptureBackend::refuse(const char* what) const {
  ST_CHECK(!capturing_, "capture backend: {} while a step is being captured", what);
  log({.kind = LaneEvent::host});
}

void CaptureBackend::log(LaneEvent e) const {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_.push_back(e);
}

std::vector<CaptureBackend::LaneEvent> CaptureBackend::lane_log() const {
  std::lock_guard<std::mutex> lock(log_mu_);
  return log_;
}

void CaptureBackend::clear_lane_log() {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_.clear();
}

// ---- the copy lane: run at once, logged ----

HostAllocator* CaptureBackend::pinned_allocator() {
  if (!copy_lane_) return nullptr;
  if (!pinned_) {
    heap_ = std::make_unique<HeapAllocator>();
    pinned_ = std::make_unique<PinnedBuffers>(*heap_, *this);
  }
  return pinned_.get();
}

void CaptureBackend::upload_async(const void* host_src, void* device_dst, size_t bytes) {
  ST_CHECK(!capturing_, "capture backend: an upload while a step is being captured");
  inner_.upload(host_src, device_dst, bytes);
  const bool direct = pinned_ && pinned_->holds(host_src, bytes);
  log({.kind = LaneEvent::upload, .lane = Lane::copy, .src = host_src, .dst = device_dst, .bytes = bytes,
       .direct = direct});
  if (direct) pinned_->read_until(host_src, mark(Lane::copy));
}

Backend::LaneMark CaptureBackend::mark(Lane lane) {
  ST_CHECK(!capturing_, "capture backend: a lane mark while a step is being captured");
  const LaneMark m{lane, ++marks_[static_cast<int>(lane)]};
  log({.kind = LaneEvent::mark, .lane = lane, .m = m});
  return m;
}

void CaptureBackend::wait(Lane waiter, LaneMark m) {
  ST_CHECK(!capturing_, "capture backend: a wait between lanes while a step is being captured");
  log({.kind = LaneEvent::wait, .lane = waiter, .m = m});
}

void CaptureBackend::host_wait(LaneMark m) {
  log({.kind = LaneEvent::host_wait, .lane = m.lane, .m = m});
  std::lock_guard<std::mutex> lock(log_mu_);
  uint64_t& w = host_waited_[static_cast<int>(m.lane)];
  w = std::max(w, m.seq);
}

bool CaptureBackend::reads_pending(const void* p, size_t bytes) const {
  const auto* lo = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(log_mu_);
  uint64_t last_copy = 0;  // the copy mark after each direct upload is the next one logged
  bool reading = false;
  for (const LaneEvent& e : log_) {
    if (e.kind == LaneEvent::upload) {
      const auto* src = static_cast<const char*>(e.src);
      reading = e.direct && !(src + e.bytes <= lo || lo + bytes <= src);
    } else if (e.kind == LaneEvent::mark && e.lane == Lane::copy && reading) {
      last_copy = std::max(last_copy, e.m.seq);
      reading = false;
    }
  }
  return last_copy > host_waited_[static_cast<int>(Lane::copy)];
}

void CaptureBackend::begin_capture() {
  ST_CHECK(!capturing_, "capture backend: a capture began inside another");
  capturing_ = true;
  recording_.clear();
}

uint64_t CaptureBackend::end_capture() {
  ST_CHECK(capturing_, "capture backend: end_capture without begin_capture");
  capturing_ = false;
  counts_.recorded = recording_.size();
  ++counts_.captures;
  captures_[next_] = Capture{std::move(recording_), releases_};
  recording_.clear();
  return next_++;
}

void CaptureBackend::abort_capture() {
  if (!capturing_) return;
  capturing_ = false;
  recording_.clear();
  ++counts_.aborted;
}

bool CaptureBackend::replay(uint64_t capture) {
  const Capture& c = captures_.at(capture);
  if (c.releases != releases_) return false;
  log({.kind = LaneEvent::op});
  for (const auto& f : c.calls) f();
  ++counts_.replays;
  return true;
}

void CaptureBackend::drop(uint64_t capture) { captures_.erase(capture); }

// ---- memory: the inner backend's, refused while capturing; releases make captures stale ----

void* CaptureBackend::allocate(size_t bytes) {
  refuse("an allocation");
  return inner_.allocate(bytes);
}

void CaptureBackend::release(void* p) {
  refuse("a release");
  inner_.release(p);
  if (p) ++releases_;
}

void CaptureBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  refuse("a copy to the host");
  inner_.copy_to_host(device_src, host_dst, bytes);
}

void CaptureBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  refuse("a copy from the host");
  inner_.copy_from_host(host_src, device_dst, bytes);
}

void CaptureBackend::upload(const void* host_src, void* device_dst, size_t bytes) {
  ST_CHECK(!capturing_, "capture backend: an upload while a step is being captured");
  log({.kind = LaneEvent::op});  // queued on the compute lane: the host does not wait
  inner_.upload(host_src, device_dst, bytes);
}

// The inner backend's layers outside a capture. The CPU's recurrent kernels are called behind
// the seam, so a capture cannot record them: an Error, and the step runs uncaptured.
class CaptureRecurrentLayers final : public RecurrentLayers {
 public:
  CaptureRecurrentLayers(CaptureBackend& b, std::unique_ptr<RecurrentLayers> inner) : b_(b), inner_(std::move(inner)) {}
  void forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y, Arena& arena,
               bool training, std::span<const int64_t> lengths) override {
    b_.refuse("a recurrent layer's forward");
    inner_->forward(layer, w, x, y, arena, training, lengths);
  }
  Tensor backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) override {
    b_.refuse("a recurrent layer's backward");
    return inner_->backward(layer, w, dy, arena, want_dx);
  }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

 private:
  CaptureBackend& b_;
  std::unique_ptr<RecurrentLayers> inner_;
};

std::unique_ptr<RecurrentLayers> CaptureBackend::make_recurrent(const RecurrentSpec& spec) {
  return std::make_unique<CaptureRecurrentLayers>(*this, inner_.make_recurrent(spec));
}

// ---- operations: recorded while capturing (host vectors they point to copied into the call) ----

bool CaptureBackend::supports(BackendOp op) const { return inner_.supports(op); }

void CaptureBackend::gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                          int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  run([=, this] { inner_.gemm(in, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); });
}
void CaptureBackend::gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A,
                               int64_t lda, const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc) {
  run([=, this] { inner_.gemm_bias(in, ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc); });
}
void CaptureBackend::convert(DType from, const void* src, DType to, void* dst, size_t n) {
  run([=, this] { inner_.convert(from, src, to, dst, n); });
}
void CaptureBackend::bias_rows(const float* b, float* y, int64_t rows, int64_t cols) {
  run([=, this] { inner_.bias_rows(b, y, rows, cols); });
}
void CaptureBackend::bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) {
  run([=, this] { inner_.bias_grad(dy, db, rows, cols); });
}
void CaptureBackend::adamw(const AdamWUpdate& u) {
  run([this, update = u, runs = *u.runs]() mutable {  // init-captures: copies that may change
    update.runs = &runs;
    inner_.adamw(update);
  });
}
void CaptureBackend::sgd(const SgdUpdate& u) {
  run([this, update = u, runs = *u.runs]() mutable {  // init-captures: copies that may change
    update.runs = &runs;
    inner_.sgd(update);
  });
}
double CaptureBackend::l2_norm(const float* x, size_t n) {
  refuse("l2_norm (a host value)");
  return inner_.l2_norm(x, n);
}
void CaptureBackend::scale(float* x, size_t n, float s) { run([=, this] { inner_.scale(x, n, s); }); }
void CaptureBackend::fill(float* x, size_t n, float v) { run([=, this] { inner_.fill(x, n, v); }); }
void CaptureBackend::copy(const float* src, float* dst, size_t n) { run([=, this] { inner_.copy(src, dst, n); }); }
void CaptureBackend::attention_forward(const AttentionArgs& a) { run([=, this] { inner_.attention_forward(a); }); }
void CaptureBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  run([=, this] { inner_.attention_backward(a, dy, dqkv); });
}
void CaptureBackend::activation_forward(ActKind k, const float* x, float* y, int64_t n) {
  run([=, this] { inner_.activation_forward(k, x, y, n); });
}
void CaptureBackend::activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                         int64_t n) {
  run([=, this] { inner_.activation_backward(k, x, y, dy, dx, n); });
}
void CaptureBackend::activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) {
  run([=, this] { inner_.activation_forward_half(k, x, to, y, n); });
}
void CaptureBackend::layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) {
  run([=, this] { inner_.layer_norm_forward_half(a, to, y); });
}
CrossEntropySum CaptureBackend::cross_entropy_forward(const CrossEntropyArgs& a) {
  refuse("cross_entropy_forward (a host value)");
  return inner_.cross_entropy_forward(a);
}
void CaptureBackend::cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) {
  run([=, this] { inner_.cross_entropy_backward(a, scale, dlogits); });
}
void CaptureBackend::cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) {
  run([=, this] { inner_.cross_entropy_accumulate(a, acc); });
}
void CaptureBackend::layer_norm_forward(const LayerNormArgs& a, float* y) {
  run([=, this] { inner_.layer_norm_forward(a, y); });
}
void CaptureBackend::layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                         float* dbias) {
  run([=, this] { inner_.layer_norm_backward(a, dy, dx, dweight, dbias); });
}
void CaptureBackend::embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) {
  run([=, this] { inner_.embedding_forward(a, table, y, accumulate); });
}
void CaptureBackend::embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) {
  run([=, this] { inner_.embedding_backward(a, dy, dtable); });
}
void CaptureBackend::dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) {
  run([=, this] { inner_.dropout_forward(x, y, n, p, seed); });
}
void CaptureBackend::dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) {
  run([=, this] { inner_.dropout_backward(dy, dx, n, p, seed); });
}
void CaptureBackend::dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) {
  run([=, this] { inner_.dropout_at(x, y, n, p, seed, first); });
}
void CaptureBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  run([=, this] { inner_.axpy(alpha, x, y, n); });
}
void CaptureBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  run([=, this] { inner_.transpose(x, y, A, B, C); });
}
double CaptureBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                               float delta) {
  refuse("regression_loss_forward (a host value)");
  return inner_.regression_loss_forward(kind, pred, target, n, delta);
}
void CaptureBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                              float delta, float k, float* grad) {
  run([=, this] { inner_.regression_loss_backward(kind, pred, target, n, delta, k, grad); });
}
void CaptureBackend::regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target,
                                                int64_t n, float delta, double* acc) {
  run([=, this] { inner_.regression_loss_accumulate(kind, pred, target, n, delta, acc); });
}
double CaptureBackend::quantile_loss_forward(const QuantileArgs& a) {
  refuse("quantile_loss_forward (a host value)");
  return inner_.quantile_loss_forward(a);
}
void CaptureBackend::quantile_loss_backward(const QuantileArgs& a, float k, float* grad) {
  run([=, this] { inner_.quantile_loss_backward(a, k, grad); });
}
void CaptureBackend::monotone_quantiles_forward(const float* raw, float* out, int64_t groups, int64_t levels) {
  run([=, this] { inner_.monotone_quantiles_forward(raw, out, groups, levels); });
}
void CaptureBackend::monotone_quantiles_backward(const float* raw, const float* dout, float* draw, int64_t groups,
                                                 int64_t levels) {
  run([=, this] { inner_.monotone_quantiles_backward(raw, dout, draw, groups, levels); });
}
void CaptureBackend::masked_max_forward(const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C,
                                        float* y, int32_t* arg) {
  run([=, this] { inner_.masked_max_forward(x, mask, B, T, C, y, arg); });
}
void CaptureBackend::masked_max_backward(const float* dy, const int32_t* arg, int64_t B, int64_t T, int64_t C,
                                         float* dx) {
  run([=, this] { inner_.masked_max_backward(dy, arg, B, T, C, dx); });
}
void CaptureBackend::clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) {
  run([=, this] { inner_.clip_grad_norm_into(g, n, max_norm, norm, skip); });
}
void CaptureBackend::scale_by(float* x, size_t n, const float* s) { run([=, this] { inner_.scale_by(x, n, s); }); }
void CaptureBackend::unscale_grads(float* g, size_t n, LossScaleState* st) {
  run([=, this] { inner_.unscale_grads(g, n, st); });
}
void CaptureBackend::update_loss_scale(LossScaleState* st, const LossScaleRule& rule) {
  run([=, this] { inner_.update_loss_scale(st, rule); });
}
void CaptureBackend::adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) {
  run([=, this] { inner_.adamw_prepare(steps, count, skip, skips); });
}
int64_t CaptureBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  refuse("token_ids (a host value)");
  return inner_.token_ids(from, x, ids, n, vocab);
}
void CaptureBackend::im2col_1d(const Conv1dArgs& a, const float* x, float* cols) {
  run([=, this] { inner_.im2col_1d(a, x, cols); });
}
void CaptureBackend::col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) {
  run([=, this] { inner_.col2im_1d(a, dcols, dx); });
}
void CaptureBackend::batch_norm_forward(const BatchNormArgs& a, float* y) {
  run([=, this] { inner_.batch_norm_forward(a, y); });
}
void CaptureBackend::batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight,
                                         float* dbias) {
  run([=, this] { inner_.batch_norm_backward(a, dy, dx, dweight, dbias); });
}
void CaptureBackend::token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  run([=, this] { inner_.token_ids_checked(from, x, ids, n, vocab); });
}

}  // namespace seqtrain::testing
