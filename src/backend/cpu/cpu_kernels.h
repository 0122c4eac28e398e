// CpuKernels: seqtrain's own CPU kernels at one instruction-set level (isa.h), as a table of
// function pointers. The kernel sources in kernels/ are compiled once per level, each copy in
// its own namespace with that level's compiler flags; cpu_kernels() hands out the table of the
// process's active level, and nothing else in the code asks which level it is.
//
// What is here is what the step spends its own (non-GEMM) time in: the fused RNN gate passes,
// the 16-bit conversions, the AdamW update and the tiled (flash) attention. Everything else is oneDNN, which dispatches
// itself (capped alike by SEQTRAIN_ISA).
#pragma once
#include <cstdint>

#include "backend/cpu/isa.h"
#include "backend/cpu/rnn_fused_args.h"

namespace seqtrain {

// One AdamW update over n elements, the scalars formed by the caller (optim/adamw.cpp).
struct AdamWKernelArgs {
  float* params = nullptr; const float* grads = nullptr; float* m = nullptr; float* v = nullptr;
  // null: decay every element. The optimizer passes null and calls the kernel once per run of
  // its mask instead (optim/optimizer.h), the non-decaying runs with decay = 1.
  const uint8_t* decay_mask = nullptr;
  int64_t n = 0;
  float decay = 1.f, b1 = 0.f, one_minus_b1 = 1.f, b2 = 0.f, one_minus_b2 = 1.f;
  float bc2_sqrt = 1.f, eps = 0.f, neg_step_size = 0.f;
  bool parallel = false;
};

// One self-attention call (backend.h's AttentionArgs, resolved by cpu_backend.cpp):
// backend/cpu/kernels/attention.cpp's tiled kernels. Forward writes y and lse; backward reads
// qkv, y, lse, dy and overwrites dqkv.
struct AttentionKernelArgs {
  int64_t B = 0, T = 0, H = 0, C = 0;
  bool bf16 = false;           // round the products' operands to bf16
  bool dropout = false;        // p > 0: keep where attention_bits() >= keep_threshold
  uint32_t keep_threshold = 0;
  float keep_scale = 1.f;      // 1 / (1 - p) (0 when p = 1)
  uint64_t seed = 0;
  bool causal = true;                         // false: no causal mask, no tiles skipped for it
  const uint8_t* key_padding_mask = nullptr;  // [B, T], nonzero = padding key (backend.h)
  const float* qkv = nullptr; float* y = nullptr; float* lse = nullptr;
  const float* dy = nullptr; float* dqkv = nullptr;
  // omp_get_max_threads() slices of attention_work_floats() floats each, one per thread.
  float* work = nullptr;
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
};

// The active level's kernels.
const CpuKernels& cpu_kernels();
// A given level's kernels, for the autotuner and tests. A level above active_isa() is a
// seqtrain::Error: a capped process never runs what the cap excludes.
const CpuKernels& cpu_kernels(Isa isa);

}  // namespace seqtrain
