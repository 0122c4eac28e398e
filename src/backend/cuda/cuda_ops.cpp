// CudaBackend's flat-buffer operations: convert, bias, AdamW and SGD, the L2 norm, scale, fill,
// copy and the activations. The argument checks, the scalars formed on the host and the
// read-back of the norm; the kernels are cuda_elementwise.cu and cuda_optim.cu.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_core_kernels.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

void check_runs(const std::vector<DecayRange>* runs, const char* who) {
  ST_CHECK(runs != nullptr, "{}: the decay runs must be given (null pointer)", who);
  for (const DecayRange& r : *runs)
    ST_CHECK(r.begin <= r.end, "{}: decay run [{}, {}) is reversed", who, r.begin, r.end);
}

}  // namespace

void CudaBackend::convert(DType from, const void* src, DType to, void* dst, size_t n) {
  const bool narrow = check_convert(name_, from, to);
  if (n == 0) return;
  const auto len = static_cast<int64_t>(n);
  const bool bf16 = (narrow ? to : from) == DType::bf16;
  if (narrow)
    ST_CUDA(launch_narrow(bf16, static_cast<const float*>(src), static_cast<uint16_t*>(dst), len, stream_));
  else
    ST_CUDA(launch_widen(bf16, static_cast<const uint16_t*>(src), static_cast<float*>(dst), len, stream_));
}

void CudaBackend::bias_rows(const float* b, float* y, int64_t rows, int64_t cols) {
  ST_CHECK(rows >= 0 && cols >= 0, "bias_rows: negative size {} x {}", rows, cols);
  if (rows == 0 || cols == 0) return;
  ST_CUDA(launch_bias_rows(b, y, rows, cols, stream_));
}

void CudaBackend::bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) {
  ST_CHECK(rows >= 0 && cols >= 0, "bias_grad: negative size {} x {}", rows, cols);
  if (rows == 0 || cols == 0) return;
  void* partials = scratch(bias_grad_scratch_bytes(rows, cols));
  ST_CUDA(launch_bias_grad(dy, db, rows, cols, partials, stream_));
}

// The scalars in double, rounded to float once, exactly as CpuBackend::adamw forms them (and
// torch when a Python float meets a float32 tensor). One launch per run of the decay mask
// (u.runs, a host vector): runs are few, and each launch carries its run's decay.
void CudaBackend::adamw(const AdamWUpdate& u) {
  check_runs(u.runs, "adamw");
  const AdamWScalars scalars = adamw_scalars(u);
  AdamWScalars s = scalars;
  for (const DecayRange& r : *u.runs) {
    const auto n = static_cast<int64_t>(r.end - r.begin);
    if (n == 0) continue;
    if (u.device || u.skip) {  // read as the kernel runs (a captured or loss-scaled step's update)
      ST_CHECK(u.device, "internal error: an AdamW update with a skip flag and no device step (Optimizer::prepare)");
      ST_CUDA(launch_adamw_from(u.params + r.begin, u.grads + r.begin, u.m + r.begin, u.v + r.begin, n,
                                &u.device->s, r.decay, u.skip, stream_));
      continue;
    }
    s.decay = r.decay ? scalars.decay : 1.f;  // a non-decaying run: torch's weight_decay-0 group
    ST_CUDA(launch_adamw(u.params + r.begin, u.grads + r.begin, u.m + r.begin, u.v + r.begin, n, s, stream_));
  }
}

// As CpuBackend::sgd: the scalars rounded to float once, each run with its weight decay or 0.
void CudaBackend::sgd(const SgdUpdate& u) {
  check_runs(u.runs, "sgd");
  SgdScalars s;
  s.momentum = static_cast<float>(u.momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - u.dampening);
  s.neg_lr = static_cast<float>(-u.lr);
  s.use_momentum = u.momentum != 0;
  s.nesterov = u.nesterov;
  s.first = u.first;
  ST_CHECK(!s.use_momentum || u.momentum_buffer, "sgd: momentum {} needs a momentum buffer (null pointer)",
           u.momentum);
  const float wd = static_cast<float>(u.weight_decay);
  for (const DecayRange& r : *u.runs) {
    const auto n = static_cast<int64_t>(r.end - r.begin);
    if (n == 0) continue;
    s.weight_decay = r.decay ? wd : 0.f;
    float* buf = s.use_momentum ? u.momentum_buffer + r.begin : nullptr;
    ST_CUDA(launch_sgd(u.params + r.begin, u.grads + r.begin, buf, n, s, stream_));
  }
}

// Two passes into scratch, the total read back through pinned memory (the one synchronization).
double CudaBackend::l2_norm(const float* x, size_t n) {
  if (n == 0) return 0.0;
  const auto len = static_cast<int64_t>(n);
  void* partials = scratch(sum_squares_scratch_bytes(len));
  ST_CUDA(launch_sum_squares(x, len, partials, stream_));
  auto* host = static_cast<double*>(pinned(sizeof(double)));
  ST_CUDA(cudaMemcpyAsync(host, sum_squares_result(partials, len), sizeof(double), cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return std::sqrt(*host);
}

void CudaBackend::scale(float* x, size_t n, float s) {
  if (n == 0) return;
  ST_CUDA(launch_scale(x, static_cast<int64_t>(n), s, stream_));
}

// +0 (zero_grad, fresh buffers) is all-zero bytes: a memset; -0 and the rest need the kernel.
void CudaBackend::fill(float* x, size_t n, float v) {
  if (n == 0) return;
  if (v == 0.f && !std::signbit(v)) {
    ST_CUDA(cudaMemsetAsync(x, 0, n * sizeof(float), stream_));
    return;
  }
  ST_CUDA(launch_fill(x, static_cast<int64_t>(n), v, stream_));
}

void CudaBackend::copy(const float* src, float* dst, size_t n) {
  if (n == 0) return;
  ST_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::activation_forward(ActKind k, const float* x, float* y, int64_t n) {
  ST_CHECK(n >= 0, "activation: {} elements", n);
  if (n == 0) return;
  ST_CUDA(launch_activation_forward(k, x, y, n, stream_));
}

void CudaBackend::activation_forward_half(ActKind k, const float* x, DType to, void* y, int64_t n) {
  ST_CHECK(n >= 0, "activation: {} elements", n);
  ST_CHECK(to == DType::bf16 || to == DType::f16, "activation half output: {} is not a 16-bit type", dtype_name(to));
  if (n == 0) return;
  ST_CUDA(launch_activation_forward_half(k, x, to == DType::bf16, y, n, stream_));
}

void CudaBackend::activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                      int64_t n) {
  ST_CHECK(n >= 0, "activation backward: {} elements", n);
  if (n == 0) return;
  ST_CUDA(launch_activation_backward(k, x, y, dy, dx, n, stream_));
}

}  // namespace seqtrain::cuda
