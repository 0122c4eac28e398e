#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#include "backend/activation_loops.h"
#include "backend/attention_dropout.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_rnn.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/gemm_fp16.h"
#include "backend/cpu/scratch.h"
#include "core/arena.h"
#include "core/error.h"

namespace seqtrain {
namespace {
// Buffers shorter than this are updated by one thread: starting an OpenMP team costs more than
// the whole pass over a few thousand floats (optim/optimizer.h's kOptimParallelMin).
constexpr size_t kParallelMin = size_t{1} << 15;

// The kernel's arguments from the op's; checks them first.
AttentionKernelArgs attention_kernel_args(const AttentionArgs& a) {
  AttentionKernelArgs k;
  static_cast<AttentionCall&>(k) = attention_call(a);
  return k;
}

// The attention kernels' per-thread workspaces (scratch.h).
float* attention_work(const AttentionKernelArgs& k, bool backward) {
  const size_t need = static_cast<size_t>(cpu_kernels().attention_work_floats(k, backward)) *
                      static_cast<size_t>(omp_get_max_threads());
  return static_cast<float*>(cpu_scratch(need * sizeof(float)));
}
}  // namespace

bool CpuBackend::supports(BackendOp op) const {
  // oneDNN 2.6 has bf16 matmuls only where the CPU has bf16 dot products (AVX512-BF16).
  if (op == BackendOp::rnn_bf16 || op == BackendOp::gemm_bf16) return cpu_has_native_bf16();
  return true;
}

void CpuBackend::gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                      int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (in == DType::f32) {
    seqtrain::gemm(ta, tb, M, N, K, alpha, static_cast<const float*>(A), lda, static_cast<const float*>(B), ldb,
                   beta, C, ldc);
    return;
  }
  ST_CHECK(in == DType::bf16 || in == DType::f16, "cpu backend: GEMM on {} operands is not supported",
           dtype_name(in));
  ST_CHECK(alpha == 1.f && (beta == 0.f || beta == 1.f),
           "cpu backend: a {} GEMM takes alpha 1 and beta 0 or 1 (got {}, {})", dtype_name(in), alpha, beta);
  const auto* a = static_cast<const uint16_t*>(A);
  const auto* b = static_cast<const uint16_t*>(B);
  if (in == DType::bf16) gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, beta == 1.f, C, ldc);
  else gemm_fp16(ta, tb, M, N, K, a, lda, b, ldb, beta == 1.f, C, ldc);
}

// The per-ISA conversion kernels (kernels/convert.cpp); f32_to_half_rows splits long runs over
// the threads.
void CpuBackend::convert(DType from, const void* src, DType to, void* dst, size_t n) {
  const int64_t len = static_cast<int64_t>(n);
  if (check_convert(name(), from, to))
    f32_to_half_rows(half_type_of(to, "convert"), static_cast<const float*>(src), len, static_cast<uint16_t*>(dst), 1,
                     len);
  else
    half_to_f32(half_type_of(from, "convert"), static_cast<const uint16_t*>(src), static_cast<float*>(dst), len);
}

// Rows split over the threads: a GPT Linear's output is up to [B*T, 4C], and a serial pass over
// it was the largest single-threaded piece of its bf16 step.
void CpuBackend::bias_rows(const float* b, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (static_cast<size_t>(rows * cols) >= kParallelMin)
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = b[j];
}

// Columns in blocks of 64 split over the threads (the per-level kernel); each column still sums
// its rows in row order, so the result is bit for bit the serial loop's for any thread count.
void CpuBackend::bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  const CpuKernels& k = cpu_kernels();
#pragma omp parallel for schedule(static) if (blocks > 1 && static_cast<size_t>(rows * cols) >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk)
    k.bias_grad_columns(dy, db, rows, cols, blk * kBlock, std::min(cols, (blk + 1) * kBlock));
}

void CpuBackend::gemm_bias(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                           const void* B, int64_t ldb, const float* bias, float* C, int64_t ldc) {
  if (in != DType::bf16) {
    Backend::gemm_bias(in, ta, tb, M, N, K, A, lda, B, ldb, bias, C, ldc);
    return;
  }
  check_gemm_bias(name(), N, ldc);
  gemm_bf16(ta, tb, M, N, K, static_cast<const uint16_t*>(A), lda, static_cast<const uint16_t*>(B), ldb, false, C,
            ldc, bias);
}

std::unique_ptr<RecurrentLayers> CpuBackend::make_recurrent(const RecurrentSpec& spec) {
  return std::make_unique<CpuRecurrentLayers>(spec);
}

// Scalars are formed in double and rounded to float once, as torch does when a Python float
// meets a float32 tensor; the per-element arithmetic (the per-ISA kernel) follows torch's
// operation order so the two agree to the last bit or close to it.
void CpuBackend::adamw(const AdamWUpdate& u) {
  if (u.skip && *u.skip != 0.f) return;  // the host's memory: an overflowed fp16 step
  // The decay runs as the kernel takes them: it walks them all in one parallel region (a few
  // dozen runs for a GPT: one call each cost a fork and join apiece, and left the small ones on
  // one thread).
  std::vector<AdamWRun> runs;
  runs.reserve(u.runs->size());
  for (const DecayRange& r : *u.runs)
    runs.push_back({static_cast<int64_t>(r.begin), static_cast<int64_t>(r.end), r.decay});
  AdamWKernelArgs k;
  k.s = u.device ? u.device->s : adamw_scalars(u);  // the host's memory either way
  k.params = u.params;
  k.grads = u.grads;
  k.m = u.m;
  k.v = u.v;
  k.runs = runs.data();
  k.n_runs = static_cast<int64_t>(runs.size());
  k.n = runs.empty() ? 0 : runs.back().end;
  k.parallel = static_cast<size_t>(k.n) >= kParallelMin;
  cpu_kernels().adamw(k);
}

void CpuBackend::sgd(const SgdUpdate& u) {
  const float wd = static_cast<float>(u.weight_decay);
  const float mom = static_cast<float>(u.momentum);
  const float one_minus_damp = static_cast<float>(1.0 - u.dampening);
  const float neg_lr = static_cast<float>(-u.lr);
  const bool use_momentum = u.momentum != 0, nesterov = u.nesterov, first = u.first;
  float* params = u.params;
  const float* grads = u.grads;
  float* buf = use_momentum ? u.momentum_buffer : nullptr;
  // Run by run of the decay mask, the non-decaying runs with weight decay 0.
  for (const DecayRange& r : *u.runs) {
    const float wd_r = r.decay ? wd : 0.f;
    const int64_t begin = static_cast<int64_t>(r.begin), end = static_cast<int64_t>(r.end);
#pragma omp parallel for simd if (r.end - r.begin >= kParallelMin)
    for (int64_t i = begin; i < end; ++i) {
      const float p = params[i];
      float d = grads[i];
      if (wd_r != 0.f) d += wd_r * p;
      if (use_momentum) {
        const float b = first ? d : buf[i] * mom + one_minus_damp * d;
        buf[i] = b;
        d = nesterov ? d + mom * b : b;
      }
      params[i] = p + neg_lr * d;
    }
  }
}

double CpuBackend::l2_norm(const float* g, size_t n) {
  const int64_t len = static_cast<int64_t>(n);
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) if (n >= kParallelMin)
  for (int64_t i = 0; i < len; ++i) {
    const double x = g[i];
    sum += x * x;
  }
  return std::sqrt(sum);
}

void CpuBackend::scale(float* g, size_t n, float s) {
  const int64_t len = static_cast<int64_t>(n);
#pragma omp parallel for simd if (n >= kParallelMin)
  for (int64_t i = 0; i < len; ++i) g[i] *= s;
}

void CpuBackend::fill(float* x, size_t n, float v) {
  // +0 (zero_grad, fresh buffers) is all-zero bytes: memset, as std::fill of 0 on a vector was.
  if (v == 0.f && !std::signbit(v)) {
    if (n) std::memset(x, 0, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) x[i] = v;
}

void CpuBackend::copy(const float* src, float* dst, size_t n) {
  if (n) std::memcpy(dst, src, n * sizeof(float));
}

}  // namespace seqtrain

namespace seqtrain {

void CpuBackend::attention_forward(const AttentionArgs& a) {
  AttentionKernelArgs k = attention_kernel_args(a);
  k.work = attention_work(k, false);
  cpu_kernels().attention_forward(k);
}

void CpuBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  AttentionKernelArgs k = attention_kernel_args(a);
  ST_CHECK(dy && dqkv, "attention backward: dy and dqkv must be given (null pointer)");
  k.dy = dy;
  k.dqkv = dqkv;
  k.work = attention_work(k, true);
  cpu_kernels().attention_backward(k);
}

}  // namespace seqtrain

namespace seqtrain {

// GELU (exact) through the level's vector kernel; the other kinds as plain loops, which the
// compiler vectorizes well enough (relu, and tanh/sigmoid that the models here barely use).
void CpuBackend::activation_forward(ActKind k, const float* x, float* y, int64_t n) {
  if (k == ActKind::gelu) return cpu_kernels().gelu_forward(x, y, n);
  activation_forward_loop(k, x, y, n);
}

// In chunks that stay in L1: each is computed into a thread's stack buffer and rounded from there,
// so the fp32 output never reaches memory. The chunks split over the threads; the activation
// calls inside one are below every kernel's threading threshold.
void CpuBackend::activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) {
  const HalfType half = half_type_of(to, "activation_forward_half");
  auto* out = static_cast<uint16_t*>(y);
  if (k == ActKind::gelu) return cpu_kernels().gelu_forward_half(half, x, out, n);
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const CpuKernels& kern = cpu_kernels();
#pragma omp parallel for schedule(static) if (static_cast<size_t>(n) >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) float tmp[kChunk];
    const int64_t i = c * kChunk, len = std::min(kChunk, n - i);
    activation_forward(k, x + i, tmp, len);
    kern.f32_to_half(half, tmp, out + i, len);
  }
}

void CpuBackend::activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                     int64_t n) {
  if (k == ActKind::gelu) return cpu_kernels().gelu_backward(x, dy, dx, n);
  activation_backward_loop(k, x, y, dy, dx, n);
}

}  // namespace seqtrain

namespace seqtrain {

// The CPU: one instance for the process (per-layer state lives in what make_recurrent returns).
BackendEntry cpu_backend_entry() {
  BackendEntry e;
  e.name = "cpu";
  e.make = [](std::string_view) -> Backend& {
    static CpuBackend cpu;
    return cpu;
  };
  return e;
}

}  // namespace seqtrain
