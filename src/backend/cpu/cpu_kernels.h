// CpuKernels: seqtrain's own CPU kernels at one instruction-set level (isa.h), as a table of
// function pointers. The kernel sources in kernels/ are compiled once per level, each copy in
// its own namespace with that level's compiler flags; cpu_kernels() hands out the table of the
// process's active level, and nothing else in the code asks which level it is.
//
// What is here is what the step spends its own (non-GEMM) time in: the fused RNN gate passes,
// the 16-bit conversions, the AdamW update, the tiled (flash) attention, GELU, and the row-wise
// ops (cross-entropy, LayerNorm, embedding, dropout). Everything else is oneDNN, which
// dispatches itself (capped alike by SEQTRAIN_ISA).
#pragma once
#include <cstdint>

#include "backend/adamw_scalars.h"
#include "backend/attention_call.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/rnn_fused_args.h"

namespace seqtrain {

// A run of equal weight-decay flags of the parameter buffer, [begin, end).
struct AdamWRun {
  int64_t begin = 0, end = 0;
  bool decay = true;
};

// One AdamW update over the flat buffers [0, n), the scalars formed by the caller
// (optim/adamw.cpp). The runs lie in [0, n) in order, elements between them (a frozen or another
// parameter group's) untouched: a decaying run scales the parameters by
// s.decay, a non-decaying one by 1 (what torch's weight_decay-0 group does); no runs (null)
// means one decaying run. One parallel region walks them all: each thread takes a contiguous,
// vector-aligned piece of [0, n) and the runs inside it, so many small runs (biases, LayerNorm)
// cost no extra fork and join, and an element's result does not depend on the thread count.
struct AdamWKernelArgs {
  float* params = nullptr; const float* grads = nullptr; float* m = nullptr; float* v = nullptr;
  const AdamWRun* runs = nullptr;
  int64_t n_runs = 0;
  int64_t n = 0;
  AdamWScalars s;  // decay: the decaying runs' factor
  bool parallel = false;
};

// One self-attention call (backend.h's AttentionArgs, resolved by cpu_backend.cpp):
// backend/cpu/kernels/attention.cpp's tiled kernels. Forward writes y and lse; backward reads
// qkv, y, lse, dy and overwrites dqkv.
struct AttentionKernelArgs : AttentionCall {
  const float* dy = nullptr;  // backward's
  float* dqkv = nullptr;
  // omp_get_max_threads() slices of attention_work_floats() floats each, one per thread.
  float* work = nullptr;
};

// Cross-entropy over rows (backend.h's CrossEntropyArgs, resolved by cpu_backend_rows.cpp).
// Forward works in blocks of kCrossEntropyBlockRows rows, each summed into its own entry of
// `blocks` (in double) and the blocks then added in order, so the sums do not depend on the
// thread count; it returns the totals and writes lse when given. Backward writes dlogits,
// reading lse when given and recomputing it otherwise.
constexpr int64_t kCrossEntropyBlockRows = 32;
struct CrossEntropyTotals {
  double loss = 0;
  int64_t count = 0, correct = 0;
};
struct CrossEntropyKernelArgs {
  int64_t rows = 0, C = 0, ignore_index = -100;
  const float* logits = nullptr;
  const int64_t* targets = nullptr;
  float* lse = nullptr;
  CrossEntropyTotals* blocks = nullptr;  // forward: ceil(rows / kCrossEntropyBlockRows) entries
  float* dlogits = nullptr;              // backward
  float scale = 1.f;
};

// LayerNorm over rows (backend.h's LayerNormArgs). Backward sums dweight and dbias per block of
// kLayerNormBlockRows rows into `partials` (2 C floats a block: dweight's, then dbias's), then
// adds the blocks in order: no dependence on the thread count.
constexpr int64_t kLayerNormBlockRows = 16;
struct LayerNormKernelArgs {
  int64_t rows = 0, C = 0;
  float eps = 1e-5f;
  const float* x = nullptr; const float* weight = nullptr; const float* bias = nullptr;
  float* mean = nullptr; float* rstd = nullptr;
  float* y = nullptr;                                             // forward
  uint16_t* y16 = nullptr; HalfType half = HalfType::bf16;        // forward instead of y: rounded
  float* row_work = nullptr;  // with y16: one row of C floats per thread (omp_get_max_threads())
  const float* dy = nullptr; float* dx = nullptr;                 // backward
  float* dweight = nullptr; float* dbias = nullptr;
  float* partials = nullptr;  // backward: ceil(rows / kLayerNormBlockRows) * 2 * C floats
};

// The embedding gather and scatter-add (backend.h's EmbeddingArgs, ids already checked).
struct EmbeddingKernelArgs {
  int64_t dim = 0, count = 0;
  const int64_t* ids = nullptr;
  const float* src = nullptr;  // forward: the table; backward: dy
  float* dst = nullptr;        // forward: y; backward: the table's gradient
  bool accumulate = false;     // forward: y += rows instead of y = rows
};

// Dropout's map y = keep(seed, i) ? x * scale : 0 (backend/dropout_mask.h), forward on x and
// backward on dy alike.
struct DropoutKernelArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t n = 0;
  uint32_t keep_threshold = 0;
  float scale = 1.f;
  uint64_t seed = 0;
  int64_t first = 0;  // element 0 is element `first` of the mask (Backend::dropout_at)
};

// The vector activation functions of the gate passes, exposed for tests.
enum class GateFn { exp, sigmoid, tanh };

struct CpuKernels {
  Isa isa;
  // One time step s (processing order) of the fused layer's gate pass (backend/cpu/rnn_fused.cpp).
  void (*lstm_step_forward)(const FusedRnnArgs& a, int64_t s);
  void (*gru_step_forward)(const FusedRnnArgs& a, int64_t s);
  void (*lstm_step_backward)(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, uint16_t* dgi_b);
  void (*gru_step_backward)(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, float* dgh,
                            uint16_t* dgi_b, uint16_t* dgh_b);
  // Round to nearest even; NaN stays NaN; fp16 overflows to inf. At avx512_bf16, f32_to_bf16 reads
  // f32 subnormals as zero (vcvtneps2bf16 always does; the compute threads run with DAZ anyway).
  void (*f32_to_bf16)(const float* src, uint16_t* dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  void (*f32_to_fp16)(const float* src, uint16_t* dst, int64_t n);
  void (*fp16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  // One of the four above by format.
  void (*f32_to_half)(HalfType t, const float* src, uint16_t* dst, int64_t n);
  void (*half_to_f32)(HalfType t, const uint16_t* src, float* dst, int64_t n);
  // Columns [j0, j1) of dy [rows, cols]: db[j] += the row-order sum of column j (Linear's bias
  // gradient; CpuBackend::bias_grad splits the columns over the threads).
  void (*bias_grad_columns)(const float* dy, float* db, int64_t rows, int64_t cols, int64_t j0, int64_t j1);
  void (*adamw)(const AdamWKernelArgs& a);
  void (*gate_fn)(GateFn fn, const float* x, float* y, int64_t n);
  void (*attention_forward)(const AttentionKernelArgs& a);
  void (*attention_backward)(const AttentionKernelArgs& a);
  // The floats of one thread's workspace slice for forward (or backward).
  int64_t (*attention_work_floats)(const AttentionKernelArgs& a, bool backward);
  // GELU, exact (erf) form: y = x Phi(x); dx = dy (Phi(x) + x phi(x)). Relative error of Phi
  // below 2e-6 (kernels/fast_math.h).
  void (*gelu_forward)(const float* x, float* y, int64_t n);
  void (*gelu_backward)(const float* x, const float* dy, float* dx, int64_t n);
  // gelu_forward with y rounded to bf16 / fp16 as it is written (each block computed into a stack
  // buffer and converted from there: the fp32 output never reaches memory).
  void (*gelu_forward_half)(HalfType t, const float* x, uint16_t* y, int64_t n);
  CrossEntropyTotals (*cross_entropy_forward)(const CrossEntropyKernelArgs& a);
  void (*cross_entropy_backward)(const CrossEntropyKernelArgs& a);
  void (*layer_norm_forward)(const LayerNormKernelArgs& a);
  void (*layer_norm_backward)(const LayerNormKernelArgs& a);
  void (*embedding_forward)(const EmbeddingKernelArgs& a);
  void (*embedding_backward)(const EmbeddingKernelArgs& a);
  void (*dropout)(const DropoutKernelArgs& a);
};

// The active level's kernels.
const CpuKernels& cpu_kernels();
// A given level's kernels, for the autotuner and tests. A level above active_isa() is a
// seqtrain::Error: a capped process never runs what the cap excludes.
const CpuKernels& cpu_kernels(Isa isa);

}  // namespace seqtrain
