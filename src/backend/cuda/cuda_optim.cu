// The AdamW and SGD kernels (launchers in cuda_core_kernels.h; cuda_ops.cpp forms the scalars):
// torch.optim's per-element arithmetic, the CPU backend's to the bit. Each element takes exactly
// the float operations of the CPU's plain kernel, in its order. The __f*_rn intrinsics make that
// explicit: nvcc would otherwise contract a * b + c into one FMA, which rounds once instead of
// twice and moves the last bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_core_kernels.h"

namespace seqtrain::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{1} << 16));
}

// backend/cpu/kernels/adamw.cpp's loop body, operation for operation.
__device__ void adamw_body(float* params, const float* grads, float* m, float* v, int64_t n, const AdamWScalars& s,
                           float decay) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grads[i];
    float p = __fmul_rn(params[i], decay);
    const float mi = __fadd_rn(__fmul_rn(m[i], s.b1), __fmul_rn(s.one_minus_b1, g));
    const float vi = __fadd_rn(__fmul_rn(v[i], s.b2), __fmul_rn(__fmul_rn(s.one_minus_b2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
    p = __fadd_rn(p, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
    m[i] = mi;
    v[i] = vi;
    params[i] = p;
  }
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t n, AdamWScalars s) {
  adamw_body(params, grads, m, v, n, s, s.decay);
}

// The scalars as they are when the kernel runs (a replayed graph reads each step's); nothing
// when the skip flag is set (an overflowed fp16 step).
__global__ void adamw_from_kernel(float* params, const float* grads, float* m, float* v, int64_t n,
                                  const AdamWScalars* scalars, bool decay, const float* skip) {
  if (skip && *skip != 0.f) return;
  const AdamWScalars s = *scalars;
  adamw_body(params, grads, m, v, n, s, decay ? s.decay : 1.f);
}

// CpuBackend::sgd's loop body, operation for operation. buf is null without momentum.
__global__ void sgd_kernel(float* params, const float* grads, float* buf, int64_t n, SgdScalars s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float p = params[i];
    float d = grads[i];
    // Skipped, not multiplied by 0, when there is no decay: 0 * inf would make a NaN.
    if (s.weight_decay != 0.f) d = __fadd_rn(d, __fmul_rn(s.weight_decay, p));
    if (s.use_momentum) {
      const float b = s.first ? d : __fadd_rn(__fmul_rn(buf[i], s.momentum), __fmul_rn(s.one_minus_dampening, d));
      buf[i] = b;
      d = s.nesterov ? __fadd_rn(d, __fmul_rn(s.momentum, b)) : b;
    }
    params[i] = __fadd_rn(p, __fmul_rn(s.neg_lr, d));
  }
}

}  // namespace

cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v, int64_t n, const AdamWScalars& a,
                         cudaStream_t s) {
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, m, v, n, a);
  return cudaGetLastError();
}

cudaError_t launch_adamw_from(float* params, const float* grads, float* m, float* v, int64_t n,
                              const AdamWScalars* a, bool decay, const float* skip, cudaStream_t s) {
  adamw_from_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, m, v, n, a, decay, skip);
  return cudaGetLastError();
}

cudaError_t launch_sgd(float* params, const float* grads, float* buf, int64_t n, const SgdScalars& a,
                       cudaStream_t s) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(params, grads, buf, n, a);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
