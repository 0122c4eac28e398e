#include "guarded_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"

namespace seqtrain::testing {

GuardedBackend::Open::Open(GuardedBackend& b) : b_(b) {
  if (b_.open_++ == 0) b_.protect_all(PROT_READ | PROT_WRITE);
}

GuardedBackend::Open::~Open() {
  if (--b_.open_ == 0) b_.protect_all(PROT_NONE);
}

void GuardedBackend::protect_all(int prot) {
  if (!protect_) return;
  for (const auto& [p, len] : pages_) ST_CHECK(::mprotect(p, len, prot) == 0, "guarded backend: mprotect failed");
}

GuardedBackend::~GuardedBackend() {
  for (const auto& [p, len] : pages_) ::munmap(p, len);
}

void* GuardedBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) / page * page;
  void* p = ::mmap(nullptr, len, open_ || !protect_ ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ST_CHECK(p != MAP_FAILED, "guarded backend: mmap of {} bytes failed", len);
  pages_[p] = len;
  table_.add(p, bytes);
  ++counts_.allocations;
  return p;
}

void GuardedBackend::release(void* p) {
  if (!p) return;
  table_.remove(p, name());
  ::munmap(p, pages_.at(p));
  pages_.erase(p);
  ++counts_.releases;
}

void GuardedBackend::copy_to_host(const void* device_src, void* host_dst, size_t bytes) {
  table_.check_range(device_src, bytes, name(), "copy_to_host");
  Open open(*this);
  if (bytes) std::memcpy(host_dst, device_src, bytes);
  ++counts_.to_host;
  counts_.to_host_bytes += bytes;
}

void GuardedBackend::copy_from_host(const void* host_src, void* device_dst, size_t bytes) {
  table_.check_range(device_dst, bytes, name(), "copy_from_host");
  Open open(*this);
  if (bytes) std::memcpy(device_dst, host_src, bytes);
  ++counts_.from_host;
  counts_.from_host_bytes += bytes;
}

// The inner backend's recurrent layers, run with the memory open (they read the weights and add
// the gradients inside forward and backward).
class GuardedRecurrentLayers final : public RecurrentLayers {
 public:
  GuardedRecurrentLayers(GuardedBackend& b, std::unique_ptr<RecurrentLayers> inner) : b_(b), inner_(std::move(inner)) {}
  void forward(size_t layer, const RecurrentWeights& w, const Tensor& x, const Tensor& y, Arena& arena,
               bool training, std::span<const int64_t> lengths) override {
    GuardedBackend::Open open(b_);
    inner_->forward(layer, w, x, y, arena, training, lengths);
  }
  Tensor backward(size_t layer, const RecurrentWeights& w, const Tensor& dy, Arena& arena, bool want_dx) override {
    GuardedBackend::Open open(b_);
    return inner_->backward(layer, w, dy, arena, want_dx);
  }
  size_t scratch_bytes() const override { return inner_->scratch_bytes(); }
  std::string layer_impl(size_t k) const override { return inner_->layer_impl(k); }

 private:
  GuardedBackend& b_;
  std::unique_ptr<RecurrentLayers> inner_;
};

bool GuardedBackend::supports(BackendOp op) const { return inner_.supports(op); }

void GuardedBackend::gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                          int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  Open open(*this);
  inner_.gemm(in, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void GuardedBackend::convert(DType from, const void* src, DType to, void* dst, size_t n) {
  Open open(*this);
  inner_.convert(from, src, to, dst, n);
}

void GuardedBackend::bias_rows(const float* b, float* y, int64_t rows, int64_t cols) {
  Open open(*this);
  inner_.bias_rows(b, y, rows, cols);
}

void GuardedBackend::bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) {
  Open open(*this);
  inner_.bias_grad(dy, db, rows, cols);
}

std::unique_ptr<RecurrentLayers> GuardedBackend::make_recurrent(const RecurrentSpec& spec) {
  return std::make_unique<GuardedRecurrentLayers>(*this, inner_.make_recurrent(spec));
}

void GuardedBackend::adamw(const AdamWUpdate& u) {
  Open open(*this);
  inner_.adamw(u);
}

void GuardedBackend::sgd(const SgdUpdate& u) {
  Open open(*this);
  inner_.sgd(u);
}

double GuardedBackend::l2_norm(const float* x, size_t n) {
  Open open(*this);
  ++counts_.value_reads;
  return inner_.l2_norm(x, n);
}

void GuardedBackend::scale(float* x, size_t n, float s) {
  Open open(*this);
  inner_.scale(x, n, s);
}

void GuardedBackend::fill(float* x, size_t n, float v) {
  Open open(*this);
  inner_.fill(x, n, v);
}

void GuardedBackend::copy(const float* src, float* dst, size_t n) {
  Open open(*this);
  inner_.copy(src, dst, n);
}

void GuardedBackend::attention_forward(const AttentionArgs& a) {
  Open open(*this);
  inner_.attention_forward(a);
}

void GuardedBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  Open open(*this);
  inner_.attention_backward(a, dy, dqkv);
}

void GuardedBackend::activation_forward(ActKind k, const float* x, float* y, int64_t n) {
  Open open(*this);
  inner_.activation_forward(k, x, y, n);
}

void GuardedBackend::activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) {
  Open open(*this);
  inner_.activation_forward_half(k, x, to, y, n);
}

void GuardedBackend::layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) {
  Open open(*this);
  inner_.layer_norm_forward_half(a, to, y);
}

void GuardedBackend::activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                         int64_t n) {
  Open open(*this);
  inner_.activation_backward(k, x, y, dy, dx, n);
}

CrossEntropySum GuardedBackend::cross_entropy_forward(const CrossEntropyArgs& a) {
  Open open(*this);
  ++counts_.value_reads;
  return inner_.cross_entropy_forward(a);
}

void GuardedBackend::cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) {
  Open open(*this);
  inner_.cross_entropy_backward(a, scale, dlogits);
}

void GuardedBackend::layer_norm_forward(const LayerNormArgs& a, float* y) {
  Open open(*this);
  inner_.layer_norm_forward(a, y);
}

void GuardedBackend::layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                         float* dbias) {
  Open open(*this);
  inner_.layer_norm_backward(a, dy, dx, dweight, dbias);
}

void GuardedBackend::embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) {
  Open open(*this);
  inner_.embedding_forward(a, table, y, accumulate);
}

void GuardedBackend::embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) {
  Open open(*this);
  inner_.embedding_backward(a, dy, dtable);
}

void GuardedBackend::dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) {
  Open open(*this);
  inner_.dropout_forward(x, y, n, p, seed);
}

void GuardedBackend::dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) {
  Open open(*this);
  inner_.dropout_backward(dy, dx, n, p, seed);
}

void GuardedBackend::axpy(float alpha, const float* x, float* y, size_t n) {
  Open open(*this);
  inner_.axpy(alpha, x, y, n);
}

void GuardedBackend::transpose(const float* x, float* y, int64_t A, int64_t B, int64_t C) {
  Open open(*this);
  inner_.transpose(x, y, A, B, C);
}

double GuardedBackend::regression_loss_forward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                               float delta) {
  Open open(*this);
  ++counts_.value_reads;
  return inner_.regression_loss_forward(kind, pred, target, n, delta);
}

void GuardedBackend::regression_loss_backward(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                              float delta, float k, float* grad) {
  Open open(*this);
  inner_.regression_loss_backward(kind, pred, target, n, delta, k, grad);
}

int64_t GuardedBackend::token_ids(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  Open open(*this);
  ++counts_.value_reads;
  return inner_.token_ids(from, x, ids, n, vocab);
}

void GuardedBackend::im2col_1d(const Conv1dArgs& a, const float* x, float* cols) {
  Open open(*this);
  inner_.im2col_1d(a, x, cols);
}

void GuardedBackend::col2im_1d(const Conv1dArgs& a, const float* dcols, float* dx) {
  Open open(*this);
  inner_.col2im_1d(a, dcols, dx);
}

void GuardedBackend::batch_norm_forward(const BatchNormArgs& a, float* y) {
  Open open(*this);
  inner_.batch_norm_forward(a, y);
}

void GuardedBackend::batch_norm_backward(const BatchNormArgs& a, const float* dy, float* dx, float* dweight,
                                         float* dbias) {
  Open open(*this);
  inner_.batch_norm_backward(a, dy, dx, dweight, dbias);
}

void GuardedBackend::upload(const void* host_src, void* device_dst, size_t bytes) {
  copy_from_host(host_src, device_dst, bytes);
  ++counts_.uploads;
}

// The accumulators run the inner backend's host-accessible defaults on the opened memory: no
// value comes back, as on a GPU.
void GuardedBackend::regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target,
                                                int64_t n, float delta, double* acc) {
  Open open(*this);
  inner_.regression_loss_accumulate(kind, pred, target, n, delta, acc);
}

void GuardedBackend::cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) {
  Open open(*this);
  inner_.cross_entropy_accumulate(a, acc);
}

void GuardedBackend::clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) {
  Open open(*this);
  inner_.clip_grad_norm_into(g, n, max_norm, norm, skip);
}

void GuardedBackend::scale_by(float* x, size_t n, const float* s) {
  Open open(*this);
  inner_.scale_by(x, n, s);
}

void GuardedBackend::unscale_grads(float* g, size_t n, LossScaleState* st) {
  Open open(*this);
  inner_.unscale_grads(g, n, st);
}

void GuardedBackend::update_loss_scale(LossScaleState* st, const LossScaleRule& rule) {
  Open open(*this);
  inner_.update_loss_scale(st, rule);
}

void GuardedBackend::adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) {
  Open open(*this);
  inner_.adamw_prepare(steps, count, skip, skips);
}

void GuardedBackend::token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  Open open(*this);
  inner_.token_ids_checked(from, x, ids, n, vocab);
}

}  // namespace seqtrain::testing
