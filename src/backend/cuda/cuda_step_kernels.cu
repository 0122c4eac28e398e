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
__global__ void clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm) {
  const double total = sqrt(*sum_squares);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first == 0) *norm = total;
  if (max_norm <= 0 || !isfinite(total)) return;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return;
  const float c = static_cast<float>(coef);
  for (int64_t i = first; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) g[i] *= c;
}

}  // namespace

cudaError_t launch_add_doubles(double* acc, const double* src, int count, cudaStream_t s) {
  add_doubles<<<1, 1, 0, s>>>(acc, src, count);
  return cudaGetLastError();
}

cudaError_t launch_add_cross_entropy(double* acc, const CrossEntropyResult* r, cudaStream_t s) {
  add_cross_entropy<<<1, 1, 0, s>>>(acc, r);
  return cudaGetLastError();
}

cudaError_t launch_clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm,
                                cudaStream_t s) {
  constexpr int kThreads = 256;
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 1024);
  clip_by_norm<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(sum_squares, norm, g, n, max_norm);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
