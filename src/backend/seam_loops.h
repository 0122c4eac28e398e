// The activation ops of backend.h (axpy, transpose, regression losses, token ids, the 1-D
// convolution's columns, BatchNorm) as plain host
// loops: the reference backend runs them as they are, the CPU backend too (with OpenMP over the
// elementwise ones), so the two agree bit for bit and match the model code they replaced.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/backend.h"

namespace seqtrain {

void axpy_loop(float alpha, const float* x, float* y, size_t n, bool parallel);
// out[i] = a[i] + b[i]: the same float sums as a copy then axpy_loop(1), in one pass.
void add_loop(const float* a, const float* b, float* out, size_t n, bool parallel);
void transpose_loop(const float* x, float* y, int64_t A, int64_t B, int64_t C, bool parallel);
// Serial on purpose: the double sum's order is the loss's value.
double regression_sum_loop(RegressionLoss kind, const float* pred, const float* target, int64_t n, float delta);
void regression_grad_loop(RegressionLoss kind, const float* pred, const float* target, int64_t n, float delta,
                          float k, float* grad);
// The first index whose value is no token id (a whole number in [0, vocab)), or -1; writes the
// ids as it goes unless ids is null (the check alone: the training step's host batch).
int64_t token_ids_loop(DType from, const void* x, int64_t* ids, int64_t n, int64_t vocab);
// Backend::im2col_1d / col2im_1d (Conv1dArgs), rows of the output in parallel when `parallel`.
void im2col_1d_loop(const Conv1dArgs& a, const float* x, float* cols, bool parallel);
void col2im_1d_loop(const Conv1dArgs& a, const float* dcols, float* dx, bool parallel);
// Backend::batch_norm_forward / _backward (BatchNormArgs): each channel's sums run over the rows
// in ascending order whatever `parallel` says (threads take channels, or rows where nothing is summed).
void batch_norm_forward_loop(const BatchNormArgs& a, float* y, bool parallel);
void batch_norm_backward_loop(const BatchNormArgs& a, const float* dy, float* dx, float* dweight, float* dbias,
                              bool parallel);

}  // namespace seqtrain
