// The kernels behind the training step's device-side scalars (backend.h: regression_loss_accumulate,
// cross_entropy_accumulate, clip_grad_norm_into): each adds a result an existing kernel left in
// scratch into the step's accumulators, or finishes clipping from the squared norm, so the step
// queues them with everything else and the host reads nothing until the log interval.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_rows_kernels.h"

namespace seqtrain::cuda {

// acc[i] += src[i] for i < count (a handful of doubles; one thread).
cudaError_t launch_add_doubles(double* acc, const double* src, int count, cudaStream_t s);
// acc[0] += r->loss, acc[1] += r->correct.
cudaError_t launch_add_cross_entropy(double* acc, const CrossEntropyResult* r, cudaStream_t s);
// *norm = sqrt(*sum_squares); when max_norm > 0 and the norm is finite and
// max_norm / (norm + 1e-6) < 1, g[i] *= that (as float), every thread reading the norm itself.
cudaError_t launch_clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm,
                                cudaStream_t s);

}  // namespace seqtrain::cuda
