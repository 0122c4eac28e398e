// The kernels of cuda_step_kernels.h.
#include "backend/cuda/cuda_step_kernels.h"

#include <algorithm>

namespace seqtrain::cuda {
namespace {

__global__ void add_doubles(double* acc, const double* src, int count) {
  for (int i = 0; i < count; ++i) acc[i] += src[i];
}

__global__ void add_cross_entropy(double* acc, const CrossEntropyResult* r) {
  acc[0] += r->loss;
  acc[1] += static_cast<double>(r->correct);
}

// The coefficient in double from the double norm, applied as a float: the host path's
// backend.scale(g, n, float(coef)), element for element the same product.
__global__ void clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm,
                             const float* skip) {
  if (skip && *skip != 0.f) return;
  const double total = sqrt(*sum_squares);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first == 0) *norm = total;
  if (max_norm <= 0 || !isfinite(total)) return;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return;
  const float c = static_cast<float>(coef);
  for (int64_t i = first; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) g[i] *= c;
}

__global__ void scale_by(float* x, int64_t n, const float* factor) {
  const float f = *factor;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(x[i], f);
}

__global__ void clear_found_inf(LossScaleState* st) { st->found_inf = 0.f; }

// Any thread that meets an inf or NaN sets the flag (the same value from all: no ordering needed).
__global__ void unscale_grads(float* g, int64_t n, LossScaleState* st) {
  const float inv = inverse_loss_scale(st->scale);
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = __fmul_rn(g[i], inv);
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (bad) st->found_inf = 1.f;
}

__global__ void update_loss_scale(LossScaleState* st, LossScaleRule rule) { update_loss_scale_state(*st, rule); }

__global__ void adamw_prepare(AdamWDeviceStep* steps, int64_t count, const float* skip, double* skips) {
  adamw_prepare_steps(steps, static_cast<unsigned long>(count), skip, skips);
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 1024));
}

}  // namespace

cudaError_t launch_scale_by(float* x, int64_t n, const float* factor, cudaStream_t s) {
  scale_by<<<grid_for(n, 256), 256, 0, s>>>(x, n, factor);
  return cudaGetLastError();
}

cudaError_t launch_unscale_grads(float* g, int64_t n, LossScaleState* st, cudaStream_t s) {
  clear_found_inf<<<1, 1, 0, s>>>(st);
  unscale_grads<<<grid_for(n, 256), 256, 0, s>>>(g, n, st);
  return cudaGetLastError();
}

cudaError_t launch_update_loss_scale(LossScaleState* st, const LossScaleRule& rule, cudaStream_t s) {
  update_loss_scale<<<1, 1, 0, s>>>(st, rule);
  return cudaGetLastError();
}

cudaError_t launch_adamw_prepare(AdamWDeviceStep* steps, int64_t count, const float* skip, double* skips,
                                 cudaStream_t s) {
  adamw_prepare<<<1, 1, 0, s>>>(steps, count, skip, skips);
  return cudaGetLastError();
}

cudaError_t launch_add_doubles(double* acc, const double* src, int count, cudaStream_t s) {
  add_doubles<<<1, 1, 0, s>>>(acc, src, count);
  return cudaGetLastError();
}

cudaError_t launch_add_cross_entropy(double* acc, const CrossEntropyResult* r, cudaStream_t s) {
  add_cross_entropy<<<1, 1, 0, s>>>(acc, r);
  return cudaGetLastError();
}

cudaError_t launch_clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm,
                                const float* skip, cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 1024);
  clip_by_norm<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(sum_squares, norm, g, n, max_norm, skip);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
