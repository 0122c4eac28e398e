// The device-neutral part of the seam: op and policy names and the lookup of a backend by its
// runtime.backend name (runtime.precision's resolution is backend/precision.cpp).
#include "backend/backend.h"

#include <algorithm>
#include <cmath>

#include "backend/attention_dropout.h"
#include "backend/clip_rule.h"
#include "core/error.h"

namespace seqtrain {

std::string_view backend_op_name(BackendOp op) {
  switch (op) {
    case BackendOp::gemm_f32: return "fp32 GEMM";
    case BackendOp::gemm_bf16: return "bf16 GEMM";
    case BackendOp::gemm_f16: return "fp16 GEMM";
    case BackendOp::bias: return "bias add";
    case BackendOp::rnn_fp32: return "fp32 recurrent layer";
    case BackendOp::rnn_bf16: return "bf16 recurrent layer";
    case BackendOp::rnn_fp16: return "fp16 recurrent layer";
    case BackendOp::rnn_grad_checkpoint: return "gradient-checkpointed recurrent layer";
    case BackendOp::adamw: return "AdamW update";
    case BackendOp::sgd: return "SGD update";
    case BackendOp::norm: return "L2 norm";
    case BackendOp::scale: return "scale";
    case BackendOp::fill: return "fill";
    case BackendOp::copy: return "copy";
    case BackendOp::activation: return "activation";
    case BackendOp::half_output: return "16-bit output (activation_forward_half, layer_norm_forward_half)";
    case BackendOp::attention_f32: return "fp32 attention";
    case BackendOp::attention_bf16: return "bf16 attention";
    case BackendOp::cross_entropy: return "cross-entropy";
    case BackendOp::layer_norm: return "LayerNorm";
    case BackendOp::embedding: return "embedding lookup";
    case BackendOp::dropout: return "dropout";
    case BackendOp::axpy: return "axpy";
    case BackendOp::transpose: return "transpose";
    case BackendOp::regression_loss: return "regression loss";
    case BackendOp::token_ids: return "token-id check";
    case BackendOp::conv1d: return "1-D convolution columns (im2col_1d / col2im_1d)";
    case BackendOp::batch_norm: return "BatchNorm (batch_norm_forward / _backward)";
  }
  return "?";
}

void Backend::require(BackendOp op, std::string_view what) const {
  ST_CHECK(supports(op), "the {} backend has no {}{}{}: use runtime.backend cpu for it", name(), backend_op_name(op),
           what.empty() ? "" : " ", what);
}

void check_attention_args(const AttentionArgs& a) {
  ST_CHECK(a.batch > 0 && a.seq > 0 && a.heads > 0 && a.channels > 0,
           "attention: batch {}, sequence length {}, n_head {} and n_embd {} must all be positive", a.batch, a.seq,
           a.heads, a.channels);
  ST_CHECK(a.channels % a.heads == 0,
           "attention: the qkv width {} (3 * n_embd) is not divisible by 3 * n_head = {}: n_embd {} must be a "
           "multiple of n_head {}",
           3 * a.channels, 3 * a.heads, a.channels, a.heads);
  ST_CHECK(a.compute == DType::f32 || a.compute == DType::bf16,
           "attention: products in {} are not supported: use f32 or bf16", dtype_name(a.compute));
  ST_CHECK(a.dropout >= 0.f && a.dropout <= 1.f, "attention: dropout probability must be in [0, 1], got {}",
           a.dropout);
  ST_CHECK(a.qkv && a.y && a.lse, "attention: qkv, y and lse must all be given (null pointer)");
}

AttentionCall attention_call(const AttentionArgs& a) {
  check_attention_args(a);
  AttentionCall k;
  k.B = a.batch; k.T = a.seq; k.H = a.heads; k.C = a.channels;
  k.bf16 = a.compute == DType::bf16;
  k.causal = a.causal;
  k.dropout = a.dropout > 0.f;
  k.keep_threshold = attention_keep_threshold(a.dropout);
  k.keep_scale = a.dropout < 1.f ? 1.f / (1.f - a.dropout) : 0.f;  // p = 1: zeros, as torch
  k.seed = a.seed;
  k.batch_offset = a.batch_offset;
  k.key_padding_mask = a.key_padding_mask;
  k.qkv = a.qkv; k.y = a.y; k.lse = a.lse;
  return k;
}

bool check_convert(std::string_view backend, DType from, DType to) {
  const bool narrow = from == DType::f32 && (to == DType::bf16 || to == DType::f16);
  const bool widen = to == DType::f32 && (from == DType::bf16 || from == DType::f16);
  ST_CHECK(narrow || widen, "{} backend: no conversion from {} to {} (f32 <-> bf16 / f16 only)", backend,
           dtype_name(from), dtype_name(to));
  return narrow;
}

void check_gemm_bias(std::string_view backend, int64_t N, int64_t ldc) {
  ST_CHECK(ldc == N, "{} backend: gemm_bias writes a contiguous C (ldc {} != N {})", backend, ldc, N);
}

void check_cross_entropy_args(const CrossEntropyArgs& a) {
  ST_CHECK(a.rows > 0 && a.classes > 0, "cross_entropy: {} rows of {} classes: both must be positive", a.rows,
           a.classes);
  ST_CHECK(a.logits && a.targets, "cross_entropy: logits and targets must be given (null pointer)");
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t t = a.targets[i];
    ST_CHECK(t == a.ignore_index || (t >= 0 && t < a.classes),
             "cross_entropy loss: target {} at row {} is out of range for {} classes (valid 0..{}, or ignore_index {})",
             t, i, a.classes, a.classes - 1, a.ignore_index);
  }
}

void check_layer_norm_args(const LayerNormArgs& a) {
  ST_CHECK(a.rows > 0 && a.channels > 0, "LayerNorm: {} rows of {} channels: both must be positive", a.rows,
           a.channels);
  ST_CHECK(a.eps > 0.f, "LayerNorm: eps must be positive, got {}", a.eps);
  ST_CHECK(a.x && a.weight && a.mean && a.rstd, "LayerNorm: x, weight, mean and rstd must be given (null pointer)");
}

void check_embedding_args(const EmbeddingArgs& a) {
  ST_CHECK(a.rows > 0 && a.dim > 0 && a.count >= 0, "Embedding: a [{}, {}] table looked up {} times: bad sizes",
           a.rows, a.dim, a.count);
  ST_CHECK(a.ids || a.count == 0, "Embedding: ids must be given (null pointer)");
  for (int64_t i = 0; i < a.count; ++i)
    ST_CHECK(a.ids[i] >= 0 && a.ids[i] < a.rows,
             "Embedding: id {} at position {} is out of range for a vocabulary of {} (valid ids are 0..{})",
             a.ids[i], i, a.rows, a.rows - 1);
}

void check_conv1d_args(const Conv1dArgs& a) {
  ST_CHECK(a.batch > 0 && a.steps > 0 && a.channels > 0 && a.kernel > 0,
           "conv1d: batch {}, steps {}, channels {} and kernel {} must all be positive", a.batch, a.steps, a.channels,
           a.kernel);
  ST_CHECK(a.pad_left >= 0 && a.pad_left < a.kernel, "conv1d: pad_left {} must be in [0, kernel {})", a.pad_left,
           a.kernel);
}

void check_batch_norm_args(const BatchNormArgs& a) {
  ST_CHECK(a.rows > 0 && a.channels > 0, "BatchNorm: {} rows of {} channels: both must be positive", a.rows,
           a.channels);
  ST_CHECK(a.count >= (a.training ? 2 : 1) && a.count <= a.rows && (a.mask || a.count == a.rows),
           "BatchNorm: {} valid rows of {} ({}): training needs at least 2 (torch: more than 1 value per channel), "
           "and without a mask every row is valid", a.count, a.rows, a.mask ? "masked" : "no mask");
  ST_CHECK(a.eps > 0.f && a.momentum >= 0.f && a.momentum <= 1.f,
           "BatchNorm: eps {} must be positive and momentum {} in [0, 1]", a.eps, a.momentum);
  ST_CHECK(a.x && a.weight && a.bias && a.mean && a.rstd && a.running_mean && a.running_var &&
               (a.num_batches_tracked || !a.training),
           "BatchNorm: x, weight, bias, mean, rstd and the running statistics must be given (null pointer)");
}

void check_dropout_args(const float* x, const float* y, int64_t n, float p) {
  ST_CHECK(n >= 0, "dropout: {} elements", n);
  ST_CHECK(p >= 0.f && p <= 1.f, "dropout probability must be in [0, 1], got {}", p);
  ST_CHECK((x && y) || n == 0, "dropout: input and output must be given (null pointer)");
}

AdamWScalars adamw_scalars(const AdamWUpdate& u) {
  return adamw_scalars_at(u.lr, u.beta1, u.beta2, u.eps, u.weight_decay, static_cast<double>(u.step));
}

// The fused operations, composed of the ones they fuse (a backend overrides what it can do in one
// pass).
void Backend::gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                        const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc) {
  check_gemm_bias(name(), N, ldc);
  bias_rows(bias, C, M, N);
  gemm(in, ta, tb, M, N, K, 1.f, A, lda, B, ldb, 1.f, C, ldc);
}

void Backend::activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) {
  (void)k; (void)x; (void)to; (void)y; (void)n;
  require(BackendOp::half_output, "(activation_forward_half)");
  throw Error(fmt::format("{} backend: activation_forward_half is not implemented", name()));
}

void Backend::layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) {
  (void)a; (void)to; (void)y;
  require(BackendOp::half_output, "(layer_norm_forward_half)");
  throw Error(fmt::format("{} backend: layer_norm_forward_half is not implemented", name()));
}

void Backend::add(const float* a, const float* b, float* out, size_t n) {
  copy(a, out, n);
  axpy(1.f, b, out, n);
}

// ---- capture: refused where supports_capture() is false (the step never asks then) ---------

void Backend::begin_capture() { fail("the {} backend cannot capture a step (runtime.cuda_graphs)", name()); }
uint64_t Backend::end_capture() { fail("the {} backend cannot capture a step (runtime.cuda_graphs)", name()); }
void Backend::abort_capture() {}
bool Backend::replay(uint64_t capture) {
  (void)capture;
  fail("the {} backend cannot replay a step (runtime.cuda_graphs)", name());
}
void Backend::drop(uint64_t capture) { (void)capture; }

// ---- the step's scalars: host-accessible defaults --------------------------------------------

void Backend::upload(const void* host_src, void* device_dst, size_t bytes) {
  copy_from_host(host_src, device_dst, bytes);
}

void Backend::upload_async(const void* host_src, void* device_dst, size_t bytes) {
  upload(host_src, device_dst, bytes);
}

void Backend::token_ids_checked(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab) {
  (void)token_ids(from, x, ids, n, vocab);
}

void Backend::regression_loss_accumulate(RegressionLoss kind, const float* pred, const float* target, int64_t n,
                                         float delta, double* acc) {
  ST_CHECK(host_accessible(), "the {} backend has no regression_loss_accumulate", name());
  acc[0] += regression_loss_forward(kind, pred, target, n, delta);
}

// The quantile ops on the host. A device backend without its own refuses: a quantile run then
// computes on the CPU (runtime.device: cpu).
double Backend::quantile_loss_forward(const QuantileArgs& a) {
  ST_CHECK(host_accessible(), "train.loss quantile runs on the CPU for now; the {} backend has no quantile loss: set "
           "runtime.device: cpu", name());
  double sum = 0;
  for (int64_t i = 0; i < a.targets; ++i)
    for (int64_t q = 0; q < a.levels; ++q) {
      const double e = static_cast<double>(a.target[i]) - a.pred[i * a.levels + q], tau = a.taus[q];
      sum += std::max(tau * e, (tau - 1) * e);
    }
  return sum;
}

void Backend::quantile_loss_backward(const QuantileArgs& a, float k, float* grad) {
  ST_CHECK(host_accessible(), "train.loss quantile runs on the CPU for now; the {} backend has no quantile loss: set "
           "runtime.device: cpu", name());
  for (int64_t i = 0; i < a.targets; ++i)
    for (int64_t q = 0; q < a.levels; ++q) {
      const float p = a.pred[i * a.levels + q], y = a.target[i], tau = a.taus[q];
      grad[i * a.levels + q] = k * (p > y ? 1.f - tau : p < y ? -tau : 0.5f - tau);
    }
}

void Backend::masked_max_forward(const float* x, const uint8_t* mask, int64_t B, int64_t T, int64_t C, float* y,
                                 int32_t* arg) {
  ST_CHECK(host_accessible(), "model.pooling max runs on the CPU for now; the {} backend has no masked max: set "
           "runtime.device: cpu", name());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      int64_t best = -1;
      for (int64_t t = 0; t < T; ++t)
        if (!(mask && mask[b * T + t]) && (best < 0 || x[(b * T + t) * C + c] > x[(b * T + best) * C + c])) best = t;
      ST_CHECK(best >= 0, "masked max: sample {} has no unpadded step", b);
      y[b * C + c] = x[(b * T + best) * C + c];
      arg[b * C + c] = static_cast<int32_t>(best);
    }
}

void Backend::masked_max_backward(const float* dy, const int32_t* arg, int64_t B, int64_t T, int64_t C, float* dx) {
  ST_CHECK(host_accessible(), "model.pooling max runs on the CPU for now; the {} backend has no masked max: set "
           "runtime.device: cpu", name());
  std::fill(dx, dx + B * T * C, 0.f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) dx[(b * T + arg[b * C + c]) * C + c] = dy[b * C + c];
}

namespace {
float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }
}  // namespace

void Backend::monotone_quantiles_forward(const float* raw, float* out, int64_t groups, int64_t levels) {
  ST_CHECK(host_accessible(), "train.quantiles run on the CPU for now; the {} backend has no monotone quantile op: "
           "set runtime.device: cpu", name());
  for (int64_t g = 0; g < groups; ++g) {
    const float* r = raw + g * levels;
    float* o = out + g * levels;
    o[0] = r[0];
    for (int64_t j = 1; j < levels; ++j) o[j] = o[j - 1] + softplus(r[j]);
  }
}

void Backend::monotone_quantiles_backward(const float* raw, const float* dout, float* draw, int64_t groups,
                                          int64_t levels) {
  ST_CHECK(host_accessible(), "train.quantiles run on the CPU for now; the {} backend has no monotone quantile op: "
           "set runtime.device: cpu", name());
  for (int64_t g = 0; g < groups; ++g) {
    const float* r = raw + g * levels;
    const float* d = dout + g * levels;
    float* dr = draw + g * levels;
    float tail = 0;  // sum of dout over the levels from j on: every later quantile includes this increment
    for (int64_t j = levels - 1; j >= 0; --j) {
      tail += d[j];
      dr[j] = j == 0 ? tail : tail / (1.f + std::exp(-r[j]));
    }
  }
}

void Backend::cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) {
  ST_CHECK(host_accessible(), "the {} backend has no cross_entropy_accumulate", name());
  const CrossEntropySum s = cross_entropy_forward(a);
  acc[0] += s.loss;
  acc[1] += static_cast<double>(s.correct);
}

void RecurrentLayers::forward_stack(std::span<const RecurrentWeights>, const Tensor&, const Tensor&, Arena&, bool,
                                    std::span<const int64_t>) {
  fail("these recurrent layers run one layer at a time (runs_stack() is false): forward_stack was called");
}

Tensor RecurrentLayers::backward_stack(std::span<const RecurrentWeights>, const Tensor&, Arena&, bool) {
  fail("these recurrent layers run one layer at a time (runs_stack() is false): backward_stack was called");
}

void Backend::clip_grad_norm_into(float* g, size_t n, double max_norm, double* norm, const float* skip) {
  ST_CHECK(host_accessible(), "the {} backend has no clip_grad_norm_into", name());
  if (skip && *skip != 0.f) return;
  const double total = l2_norm(g, n);
  *norm = total;
  const double coef = clip_coefficient(total, max_norm);
  if (coef < 1.0) scale(g, n, static_cast<float>(coef));
}

void Backend::scale_by(float* x, size_t n, const float* s) {
  ST_CHECK(host_accessible(), "the {} backend has no scale_by", name());
  scale(x, n, *s);
}

// Shorter gradient buffers are unscaled by one thread: starting an OpenMP team costs more than
// the pass (optim/optimizer.h's kOptimParallelMin).
constexpr size_t kUnscaleParallelMin = size_t{1} << 15;

void Backend::unscale_grads(float* g, size_t n, LossScaleState* st) {
  ST_CHECK(host_accessible(), "the {} backend has no unscale_grads", name());
  const float inv = inverse_loss_scale(st->scale);
  const auto len = static_cast<int64_t>(n);
  int bad = 0;
  // x - x is 0 for finite x and NaN for inf or NaN: a branch-free finite test that vectorizes.
#pragma omp parallel for simd reduction(| : bad) if (n >= kUnscaleParallelMin)
  for (int64_t i = 0; i < len; ++i) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= (v - v) != 0.f;
  }
  st->found_inf = bad ? 1.f : 0.f;
}

void Backend::update_loss_scale(LossScaleState* st, const LossScaleRule& rule) {
  ST_CHECK(host_accessible(), "the {} backend has no update_loss_scale", name());
  update_loss_scale_state(*st, rule);
}

void Backend::adamw_prepare(AdamWDeviceStep* steps, size_t count, const float* skip, double* skips) {
  ST_CHECK(host_accessible(), "the {} backend has no adamw_prepare", name());
  adamw_prepare_steps(steps, count, skip, skips);
}

}  // namespace seqtrain
