// The kernels behind the training step's device-side scalars (backend.h: regression_loss_accumulate,
// cross_entropy_accumulate, clip_grad_norm_into, the loss scale's, adamw_prepare): each adds a result an existing kernel left in
// scratch into the step's accumulators, or finishes clipping from the squared norm, so the step
// queues them with everything else and the host reads nothing until the log interval.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/adamw_scalars.h"
#include "backend/cuda/cuda_rows_kernels.h"
#include "backend/loss_scale_state.h"

namespace seqtrain::cuda {

// acc[i] += src[i] for i < count (a handful of doubles; one thread).
cudaError_t launch_add_doubles(double* acc, const double* src, int count, cudaStream_t s);
// acc[0] += r->loss, acc[1] += r->correct.
cudaError_t launch_add_cross_entropy(double* acc, const CrossEntropyResult* r, cudaStream_t s);
// *norm = sqrt(*sum_squares); when max_norm > 0 and the norm is finite and
// max_norm / (norm + 1e-6) < 1, g[i] *= that (as float), every thread reading the norm itself.
// Nothing when skip (may be null) is nonzero.
cudaError_t launch_clip_by_norm(const double* sum_squares, double* norm, float* g, int64_t n, double max_norm,
                                const float* skip, cudaStream_t s);
// fp16's loss scaling (backend.h: scale_by, unscale_grads, update_loss_scale) and AdamW's
// device step (adamw_prepare): backend/loss_scale_state.h's and backend/adamw_scalars.h's rules.
cudaError_t launch_scale_by(float* x, int64_t n, const float* factor, cudaStream_t s);
cudaError_t launch_unscale_grads(float* g, int64_t n, LossScaleState* st, cudaStream_t s);
cudaError_t launch_update_loss_scale(LossScaleState* st, const LossScaleRule& rule, cudaStream_t s);
cudaError_t launch_adamw_prepare(AdamWDeviceStep* steps, int64_t count, const float* skip, double* skips,
                                 cudaStream_t s);

}  // namespace seqtrain::cuda
