// The launchers of the CUDA backend's core kernels (cuda_elementwise.cu, cuda_optim.cu), called
// by the CudaBackend members in cuda_ops.cpp and cuda_gemm.cpp. Plain host functions that queue
// their kernels on `s` and return the launch's status: the .cu files hold kernels only, and the
// members, which format errors with fmt (nvcc cannot evaluate fmt's compile-time checks), turn a
// status into an Error with ST_CUDA. Sizes are element counts, already checked by the caller.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/activation_kind.h"
#include "backend/adamw_scalars.h"

namespace seqtrain::cuda {

// dst[i] = src[i] rounded to bf16 (or fp16) as raw bits; backend/cpu/half_scalar.h's rounding.
cudaError_t launch_narrow(bool bf16, const float* src, uint16_t* dst, int64_t n, cudaStream_t s);
// dst[i] = the bf16 (or fp16) bits src[i] widened exactly.
cudaError_t launch_widen(bool bf16, const uint16_t* src, float* dst, int64_t n, cudaStream_t s);

// y[i, j] = b[j] over rows x cols.
cudaError_t launch_bias_rows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t s);
// db[j] += sum_i dy[i, j] in double, in an order fixed by (rows, cols); `scratch` holds
// bias_grad_scratch_bytes(rows, cols).
size_t bias_grad_scratch_bytes(int64_t rows, int64_t cols);
cudaError_t launch_bias_grad(const float* dy, float* db, int64_t rows, int64_t cols, void* scratch, cudaStream_t s);

// The sum of x[i]^2 in double, written to the double at sum_squares_result(scratch, n), in an
// order fixed by n; `scratch` holds sum_squares_scratch_bytes(n).
size_t sum_squares_scratch_bytes(int64_t n);
double* sum_squares_result(void* scratch, int64_t n);
cudaError_t launch_sum_squares(const float* x, int64_t n, void* scratch, cudaStream_t s);

// x[i] *= v; x[i] = v; and c[i, j] *= v over a rows x cols block with row stride ld.
cudaError_t launch_scale(float* x, int64_t n, float v, cudaStream_t s);
cudaError_t launch_fill(float* x, int64_t n, float v, cudaStream_t s);
cudaError_t launch_scale_block(float* c, int64_t rows, int64_t cols, int64_t ld, float v, cudaStream_t s);

// activation_loops.cpp's forward and backward for kind k (backward reads y for ReLU, Tanh and
// Sigmoid, x for the GELUs; the other may be null).
cudaError_t launch_activation_forward(ActKind k, const float* x, float* y, int64_t n, cudaStream_t s);
// y = f(x) rounded to bf16 (else fp16) as raw 16-bit values, the bits of launch_narrow(f(x)).
cudaError_t launch_activation_forward_half(ActKind k, const float* x, bool bf16, void* y, int64_t n,
                                          cudaStream_t s);
cudaError_t launch_activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                       int64_t n, cudaStream_t s);

// AdamW over one run of the decay mask: the CPU kernel's float scalars (cpu_backend.cpp forms
// them the same way), decay = 1 - lr wd for a decaying run, 1 otherwise.
cudaError_t launch_adamw(float* params, const float* grads, float* m, float* v, int64_t n, const AdamWScalars& a,
                         cudaStream_t s);
// The same with the scalars read from device memory as the kernel runs (a captured step's update:
// AdamWUpdate::device); decay false takes their decay as 1; nothing when skip (device memory, may
// be null) is nonzero.
cudaError_t launch_adamw_from(float* params, const float* grads, float* m, float* v, int64_t n,
                              const AdamWScalars* a, bool decay, const float* skip, cudaStream_t s);

// SGD over one run: weight_decay is the run's (0 for a non-decaying run); buf null without
// momentum.
struct SgdScalars {
  float weight_decay = 0.f, momentum = 0.f, one_minus_dampening = 1.f, neg_lr = 0.f;
  bool use_momentum = false, nesterov = false, first = false;
};
cudaError_t launch_sgd(float* params, const float* grads, float* buf, int64_t n, const SgdScalars& a,
                       cudaStream_t s);

}  // namespace seqtrain::cuda
