// The CPU backend's row-wise ops: cross-entropy, LayerNorm, the embedding lookup and dropout.
// Each checks its arguments (backend.cpp's check_*), resolves them into the kernel's and calls
// the active ISA level's kernel (cpu_kernels.h; kernels/cross_entropy.cpp, layer_norm.cpp,
// embedding.cpp, dropout.cpp). Per-block partial sums come from the per-call scratch (scratch.h).
#include <omp.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/scratch.h"
#include "backend/dropout_mask.h"
#include "core/error.h"

namespace seqtrain {
namespace {

CrossEntropyKernelArgs cross_entropy_kernel_args(const CrossEntropyArgs& a) {
  check_cross_entropy_args(a);
  CrossEntropyKernelArgs k;
  k.rows = a.rows; k.C = a.classes; k.ignore_index = a.ignore_index;
  k.logits = a.logits; k.targets = a.targets; k.lse = a.lse;
  return k;
}

LayerNormKernelArgs layer_norm_kernel_args(const LayerNormArgs& a) {
  check_layer_norm_args(a);
  LayerNormKernelArgs k;
  k.rows = a.rows; k.C = a.channels; k.eps = a.eps;
  k.x = a.x; k.weight = a.weight; k.bias = a.bias; k.mean = a.mean; k.rstd = a.rstd;
  return k;
}

EmbeddingKernelArgs embedding_kernel_args(const EmbeddingArgs& a, const float* src, float* dst) {
  check_embedding_args(a);
  ST_CHECK((src && dst) || a.count == 0, "Embedding: table, dy and outputs must be given (null pointer)");
  EmbeddingKernelArgs k;
  k.dim = a.dim; k.count = a.count; k.ids = a.ids; k.src = src; k.dst = dst;
  return k;
}

void dropout_map(const float* x, float* y, int64_t n, float p, uint64_t seed, int64_t first = 0) {
  check_dropout_args(x, y, n, p);
  DropoutKernelArgs k;
  k.x = x; k.y = y; k.n = n; k.first = first;
  k.keep_threshold = attention_keep_threshold(p);
  k.scale = dropout_scale(p);
  k.seed = seed;
  cpu_kernels().dropout(k);
}

template <class T>
T* scratch_of(int64_t n) {
  return static_cast<T*>(cpu_scratch(static_cast<size_t>(n) * sizeof(T)));
}

}  // namespace

CrossEntropySum CpuBackend::cross_entropy_forward(const CrossEntropyArgs& a) {
  CrossEntropyKernelArgs k = cross_entropy_kernel_args(a);
  k.blocks = scratch_of<CrossEntropyTotals>((a.rows + kCrossEntropyBlockRows - 1) / kCrossEntropyBlockRows);
  const CrossEntropyTotals t = cpu_kernels().cross_entropy_forward(k);
  return {t.loss, t.count, t.correct};
}

void CpuBackend::cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) {
  CrossEntropyKernelArgs k = cross_entropy_kernel_args(a);
  ST_CHECK(dlogits, "cross_entropy backward: dlogits must be given (null pointer)");
  k.dlogits = dlogits;
  k.scale = static_cast<float>(scale);
  cpu_kernels().cross_entropy_backward(k);
}

void CpuBackend::layer_norm_forward(const LayerNormArgs& a, float* y) {
  LayerNormKernelArgs k = layer_norm_kernel_args(a);
  ST_CHECK(y, "LayerNorm forward: y must be given (null pointer)");
  k.y = y;
  cpu_kernels().layer_norm_forward(k);
}

void CpuBackend::layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) {
  LayerNormKernelArgs k = layer_norm_kernel_args(a);
  k.half = half_type_of(to, "layer_norm_forward_half");
  ST_CHECK(y, "LayerNorm forward: y must be given (null pointer)");
  k.y16 = static_cast<uint16_t*>(y);
  k.row_work = scratch_of<float>(static_cast<int64_t>(omp_get_max_threads()) * a.channels);
  cpu_kernels().layer_norm_forward(k);
}

void CpuBackend::layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                     float* dbias) {
  LayerNormKernelArgs k = layer_norm_kernel_args(a);
  ST_CHECK(dy && dx && dweight, "LayerNorm backward: dy, dx and dweight must be given (null pointer)");
  k.dy = dy; k.dx = dx; k.dweight = dweight; k.dbias = dbias;
  k.partials = scratch_of<float>((a.rows + kLayerNormBlockRows - 1) / kLayerNormBlockRows * 2 * a.channels);
  cpu_kernels().layer_norm_backward(k);
}

void CpuBackend::embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) {
  EmbeddingKernelArgs k = embedding_kernel_args(a, table, y);
  k.accumulate = accumulate;
  cpu_kernels().embedding_forward(k);
}

void CpuBackend::embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) {
  cpu_kernels().embedding_backward(embedding_kernel_args(a, dy, dtable));
}

void CpuBackend::dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) {
  dropout_map(x, y, n, p, resolve_seed(seed));  // the host's memory
}

void CpuBackend::dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) {
  dropout_map(dy, dx, n, p, resolve_seed(seed));
}

void CpuBackend::dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) {
  dropout_map(x, y, n, p, resolve_seed(seed), first);
}

}  // namespace seqtrain
