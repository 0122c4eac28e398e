// This level's table of kernels (cpu_kernels.h), found by cpu_kernels.cpp under the name
// seqtrain::<level namespace>::kKernels.
#include "backend/cpu/kernels/level.h"

namespace seqtrain::ST_ISA_NS {

extern const CpuKernels kKernels;
const CpuKernels kKernels = {
    Isa::ST_ISA_LEVEL, lstm_step_forward, gru_step_forward, lstm_step_backward, gru_step_backward,
    f32_to_bf16,       bf16_to_f32,       f32_to_fp16,      fp16_to_f32,        f32_to_half,
    half_to_f32,       bias_grad_columns, adamw,             gate_fn,          attention_forward,  attention_backward,
    attention_work_floats, gelu_forward,  gelu_backward, gelu_forward_half,
    cross_entropy_forward, cross_entropy_backward, layer_norm_forward, layer_norm_backward,
    embedding_forward, embedding_backward, dropout,
};

}  // namespace seqtrain::ST_ISA_NS
