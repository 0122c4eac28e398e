// The kernels of one instruction-set level, as declared to each other and to table.cpp. Every
// file of this folder is compiled once per level (CMakeLists.txt), inside the namespace ST_ISA_NS
// (isa_plain, isa_avx2, ...) with that level's compiler flags; cpu_kernels.cpp picks a table.
//
// Rules for these files, because code compiled for AVX-512 must never run on a lesser CPU:
// include only headers of plain declarations and data (no inline functions or templates shared
// with the rest of the program: the linker could keep this level's copy for every caller), keep
// helpers in vec.h's anonymous namespace, and call nothing outside but other kernels of the
// same level, OpenMP and libc.
#pragma once
#include <cstdint>

#include "backend/cpu/cpu_kernels.h"

namespace seqtrain::ST_ISA_NS {

void lstm_step_forward(const FusedRnnArgs& a, int64_t s);
void gru_step_forward(const FusedRnnArgs& a, int64_t s);
void lstm_step_backward(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, uint16_t* dgi_b);
void gru_step_backward(const FusedRnnArgs& a, const FusedRnnGrads& g, int64_t s, float* dgi, float* dgh,
                       uint16_t* dgi_b, uint16_t* dgh_b);
void f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp16(const float* src, uint16_t* dst, int64_t n);
void fp16_to_f32(const uint16_t* src, float* dst, int64_t n);
void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n);
void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n);
void bias_grad_columns(const float* dy, float* db, int64_t rows, int64_t cols, int64_t j0, int64_t j1);
void adamw(const AdamWKernelArgs& a);
void gate_fn(GateFn fn, const float* x, float* y, int64_t n);
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
void gelu_forward_half(HalfType t, const float* x, uint16_t* y, int64_t n);
void attention_forward(const AttentionKernelArgs& a);
void attention_backward(const AttentionKernelArgs& a);
int64_t attention_work_floats(const AttentionKernelArgs& a, bool backward);
CrossEntropyTotals cross_entropy_forward(const CrossEntropyKernelArgs& a);
void cross_entropy_backward(const CrossEntropyKernelArgs& a);
void layer_norm_forward(const LayerNormKernelArgs& a);
void layer_norm_backward(const LayerNormKernelArgs& a);
void embedding_forward(const EmbeddingKernelArgs& a);
void embedding_backward(const EmbeddingKernelArgs& a);
void dropout(const DropoutKernelArgs& a);

}  // namespace seqtrain::ST_ISA_NS
