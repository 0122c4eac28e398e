// CudaBackend's row-wise operations (cross-entropy, LayerNorm, embedding, dropout): argument
// checks, scratch and the read-back of results and bad-index flags around the kernels of
// cuda_rows.cu.
//
// Targets and ids live in device memory, so backend.cpp's check_cross_entropy_args /
// check_embedding_args (which read them on the host) cannot be called. The host checks sizes and
// pointers; the kernels check each target / id and lower a flag to the first bad row; the host
// reads the flag after the op and throws the same text as those checks. That read is a stream
// synchronization in every op with targets or ids, not only in cross_entropy_forward (which
// waits for its sums anyway): correctness first, a bad id must not pass silently. The training
// step checks its targets on the host (CrossEntropyArgs::targets_checked), so cross-entropy
// skips the read there; the embeddings' id checks still synchronize (the GPT's inputs).
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_rows_kernels.h"
#include "backend/cuda/cuda_step_kernels.h"
#include "backend/dropout_mask.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

// The value at device position values[row] (the bad target or id), read synchronously.
int64_t read_value(CudaBackend& be, const int64_t* values, unsigned long long row) {
  auto* host = static_cast<int64_t*>(be.pinned(sizeof(int64_t)));
  ST_CUDA(cudaMemcpyAsync(host, values + row, sizeof *host, cudaMemcpyDeviceToHost, be.stream()));
  be.synchronize();
  return *host;
}

// The flag the kernels lowered, read synchronously (kNoBadRow: every index was valid).
unsigned long long read_flag(CudaBackend& be, const unsigned long long* flag) {
  auto* host = static_cast<unsigned long long*>(be.pinned(sizeof(unsigned long long)));
  ST_CUDA(cudaMemcpyAsync(host, flag, sizeof *host, cudaMemcpyDeviceToHost, be.stream()));
  be.synchronize();
  return *host;
}

// The error texts of backend.cpp's check_cross_entropy_args / check_embedding_args.
void throw_if_bad_target(CudaBackend& be, unsigned long long row, const CrossEntropyArgs& a) {
  if (row == kNoBadRow) return;
  fail("cross_entropy loss: target {} at row {} is out of range for {} classes (valid 0..{}, or ignore_index {})",
       read_value(be, a.targets, row), row, a.classes, a.classes - 1, a.ignore_index);
}
void throw_if_bad_id(CudaBackend& be, unsigned long long row, const EmbeddingArgs& a) {
  if (row == kNoBadRow) return;
  fail("Embedding: id {} at position {} is out of range for a vocabulary of {} (valid ids are 0..{})",
       read_value(be, a.ids, row), row, a.rows, a.rows - 1);
}

// The host-side halves of those checks: sizes and pointers only.
void check_cross_entropy_shape(const CrossEntropyArgs& a) {
  ST_CHECK(a.rows > 0 && a.classes > 0, "cross_entropy: {} rows of {} classes: both must be positive", a.rows,
           a.classes);
  ST_CHECK(a.logits && a.targets, "cross_entropy: logits and targets must be given (null pointer)");
  ST_CHECK(a.rows <= INT32_MAX, "cross_entropy: {} rows is more than one CUDA launch takes", a.rows);
}
void check_embedding_shape(const EmbeddingArgs& a) {
  ST_CHECK(a.rows > 0 && a.dim > 0 && a.count >= 0, "Embedding: a [{}, {}] table looked up {} times: bad sizes",
           a.rows, a.dim, a.count);
  ST_CHECK(a.ids || a.count == 0, "Embedding: ids must be given (null pointer)");
}

CrossEntropyLaunch launch_args(const CrossEntropyArgs& a) {
  return {a.rows, a.classes, a.logits, a.targets, a.ignore_index, a.lse};
}
LayerNormLaunch launch_args(const LayerNormArgs& a) {
  ST_CHECK(a.rows <= INT32_MAX && (a.rows + 63) / 64 <= 65535, "LayerNorm: {} rows is more than these kernels take",
           a.rows);
  return {a.rows, a.channels, a.eps, a.x, a.weight, a.bias, a.mean, a.rstd};
}
EmbeddingLaunch launch_args(const EmbeddingArgs& a) { return {a.rows, a.dim, a.count, a.ids}; }

void run_dropout(CudaBackend& be, const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first = 0) {
  check_dropout_args(x, y, n, p);
  if (n == 0) return;
  // The threshold and scale once on the host, exactly as dropout_keep / the CPU kernel take them.
  ST_CUDA(launch_dropout(x, y, n, seed, first, attention_keep_threshold(p), dropout_scale(p), be.stream()));
}

}  // namespace

CrossEntropySum CudaBackend::cross_entropy_forward(const CrossEntropyArgs& a) {
  check_cross_entropy_shape(a);
  void* s = scratch(cross_entropy_forward_scratch(a.rows));
  ST_CUDA(launch_cross_entropy_forward(launch_args(a), s, stream_));
  auto* host = static_cast<CrossEntropyResult*>(pinned(sizeof(CrossEntropyResult)));
  ST_CUDA(cudaMemcpyAsync(host, s, sizeof *host, cudaMemcpyDeviceToHost, stream_));
  synchronize();
  const CrossEntropyResult r = *host;
  throw_if_bad_target(*this, r.bad_row, a);
  return {r.loss, static_cast<int64_t>(r.count), static_cast<int64_t>(r.correct)};
}

// The sums stay on the device; the target check is read back only when the caller has not
// checked the targets itself (the training step checks them on the host).
void CudaBackend::cross_entropy_accumulate(const CrossEntropyArgs& a, double* acc) {
  check_cross_entropy_shape(a);
  void* s = scratch(cross_entropy_forward_scratch(a.rows));
  ST_CUDA(launch_cross_entropy_forward(launch_args(a), s, stream_));
  if (!a.targets_checked) throw_if_bad_target(*this, read_flag(*this, &static_cast<CrossEntropyResult*>(s)->bad_row), a);
  ST_CUDA(launch_add_cross_entropy(acc, static_cast<const CrossEntropyResult*>(s), stream_));
}

void CudaBackend::cross_entropy_backward(const CrossEntropyArgs& a, double scale, float* dlogits) {
  check_cross_entropy_shape(a);
  ST_CHECK(dlogits, "cross_entropy backward: dlogits must be given (null pointer)");
  auto* flag = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  ST_CUDA(launch_cross_entropy_backward(launch_args(a), static_cast<float>(scale), dlogits, flag, stream_));
  if (!a.targets_checked) throw_if_bad_target(*this, read_flag(*this, flag), a);
}

void CudaBackend::layer_norm_forward(const LayerNormArgs& a, float* y) {
  check_layer_norm_args(a);
  ST_CHECK(y, "LayerNorm forward: y must be given (null pointer)");
  ST_CUDA(launch_layer_norm_forward(launch_args(a), y, stream_));
}

void CudaBackend::layer_norm_forward_half(const LayerNormArgs& a, DType to, void* y) {
  check_layer_norm_args(a);
  ST_CHECK(y, "LayerNorm forward: y must be given (null pointer)");
  ST_CHECK(to == DType::bf16 || to == DType::f16, "LayerNorm half output: {} is not a 16-bit type", dtype_name(to));
  ST_CUDA(launch_layer_norm_forward_half(launch_args(a), to == DType::bf16, y, stream_));
}

void CudaBackend::layer_norm_backward(const LayerNormArgs& a, const float* dy, float* dx, float* dweight,
                                      float* dbias) {
  check_layer_norm_args(a);
  ST_CHECK(dy && dx && dweight, "LayerNorm backward: dy, dx and dweight must be given (null pointer)");
  void* s = scratch(layer_norm_backward_scratch(a.rows, a.channels));
  ST_CUDA(launch_layer_norm_backward(launch_args(a), dy, dx, dweight, dbias, s, stream_));
}

void CudaBackend::embedding_forward(const EmbeddingArgs& a, const float* table, float* y, bool accumulate) {
  check_embedding_shape(a);
  ST_CHECK(table && (y || a.count == 0), "Embedding forward: table and y must be given (null pointer)");
  if (a.count == 0) return;
  auto* flag = static_cast<unsigned long long*>(scratch(sizeof(unsigned long long)));
  ST_CUDA(launch_embedding_forward(launch_args(a), table, y, accumulate, flag, stream_));
  if (!a.ids_checked) throw_if_bad_id(*this, read_flag(*this, flag), a);
}

void CudaBackend::embedding_backward(const EmbeddingArgs& a, const float* dy, float* dtable) {
  check_embedding_shape(a);
  ST_CHECK(dtable && (dy || a.count == 0), "Embedding backward: dy and dtable must be given (null pointer)");
  if (a.count == 0) return;
  const EmbeddingLaunch l = launch_args(a);
  void* s = scratch(embedding_backward_scratch(l));
  ST_CUDA(launch_embedding_backward(l, dy, dtable, s, stream_));
  if (!a.ids_checked) throw_if_bad_id(*this, read_flag(*this, static_cast<unsigned long long*>(s)), a);
}

void CudaBackend::dropout_forward(const float* x, float* y, int64_t n, float p, DropoutSeed seed) {
  run_dropout(*this, x, y, n, p, seed);
}

void CudaBackend::dropout_backward(const float* dy, float* dx, int64_t n, float p, DropoutSeed seed) {
  run_dropout(*this, dy, dx, n, p, seed);
}

void CudaBackend::dropout_at(const float* x, float* y, int64_t n, float p, DropoutSeed seed, int64_t first) {
  run_dropout(*this, x, y, n, p, seed, first);
}

}  // namespace seqtrain::cuda
