// The arguments of the fused RNN kernels (rnn_fused.h): one layer direction's weights, inputs,
// saved state and workspaces. A header of plain data, because the gate passes compiled once per
// instruction-set level (kernels/) include it: nothing here may generate code that the linker
// could share between levels.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm_fp16.h"
#include "backend/cpu/rnn_cell.h"

namespace seqtrain {

class RecurrentGemm;
struct CpuKernels;

struct FusedRnnArgs {
  RnnCell cell = RnnCell::lstm;
  bool reverse = false;       // process t = T-1 .. 0
  int64_t T = 0, N = 0, C = 0, H = 0;
  const float* w_ih = nullptr; const float* w_hh = nullptr;
  const float* b_ih = nullptr; const float* b_hh = nullptr;
  const float* x = nullptr;   // [T, N, C]
  // [N] valid steps per row, in [1, T] (RecurrentLayers::forward's lengths); null: all T. A row
  // past its length gets zero output and zero saved state there (so the reverse direction
  // starts each row from a zero state at its last valid step) and zero gate gradients.
  const int64_t* lengths = nullptr;
  float* out = nullptr;       // [T, N, ld_out]; this direction writes columns [0, H) of it
  int64_t ld_out = 0;
  // Saved for backward, [T, N, G*H] and [T, N, H]: activated gates; LSTM cell state or GRU's
  // W_hn h + b_hn.
  float* gates = nullptr; float* extra = nullptr;
  // When > 0, `gates` holds a block of this many time steps only (step t in slot t % gate_slots,
  // blocks aligned to its multiples) and extra, out (and h_bf) keep the whole sequence:
  // gradient checkpointing, where fused_rnn_backward (FusedRnnGrads::recompute) recomputes
  // each block's gates just before its backward, or 16-bit mode with gates_half (below). Must
  // then equal FusedRnnGrads::chunk.
  int64_t gate_slots = 0;
  // 16-bit mode may set gates_half: the activated gates are then saved there in the 16-bit
  // format instead of in `gates` ([T, N, G*H], or a block of half_slots steps under gradient
  // checkpointing, like gate_slots), which halves the saved gates' memory traffic in the
  // forward and the backward. `gates` is then only the fp32 working block where each block's
  // input projection lands and the gate pass computes; set gate_slots so that it stays in cache.
  uint16_t* gates_half = nullptr;
  int64_t half_slots = 0;
  float* scratch = nullptr;   // [N, G*H]: the step's recurrent projection h_prev W_hh^T
  // Mixed precision (backend/cpu/gemm_bf16.h, gemm_fp16.h): when w_ih_bf is set, every GEMM
  // takes 16-bit inputs of type `half` (the *_bf buffers then hold that format) with fp32
  // accumulation and output; gate math, the cell state, the saved state and the outputs stay
  // fp32. Set 16-bit copies of w_ih and x, and h_bf, [T, N, H], where forward writes this
  // direction's outputs in 16 bits (the next step's GEMM input and backward's dW_hh input);
  // and a 16-bit copy of w_hh unless rec is set (RecurrentGemm packs its own bf16 from w_hh).
  const uint16_t* w_ih_bf = nullptr; const uint16_t* w_hh_bf = nullptr;
  const uint16_t* x_bf = nullptr;
  uint16_t* h_bf = nullptr;
  HalfType half = HalfType::bf16;
  // Runs the per-step GEMM with W_hh packed once (prepared by fused_rnn_forward); null: gemm().
  // fp32 or bf16 only (fp16 is emulated through gemm_half).
  RecurrentGemm* rec = nullptr;
  // The gate passes' kernels (cpu_kernels(Isa)); null: the process's active level. The autotuner
  // sets a lower level where it measures faster.
  const CpuKernels* kernels = nullptr;
  bool bf16() const { return w_ih_bf != nullptr; }
};

struct FusedRnnGrads {
  const float* dout = nullptr;  // [T, N, ld_out], this direction's columns [0, H)
  float* dx = nullptr;          // [T, N, C]; written (accumulate_dx false) or added to; null: skipped
  bool accumulate_dx = false;
  float* dw_ih = nullptr; float* dw_hh = nullptr; float* db_ih = nullptr; float* db_hh = nullptr;  // added to
  // The whole-sequence GEMMs (dW_ih, dW_hh, dx) run on chunks of `chunk` time steps as the
  // backward loop completes them (0: the whole sequence at once); fused_rnn_backward_chunk()
  // gives the size. Workspace: [chunk, N, G*H] twice (gate gradients for the input and the
  // recurrent side; the same buffer for the LSTM), and [N, H] twice (dh and dc carried
  // between steps).
  int64_t chunk = 0;
  float* dgi = nullptr; float* dgh = nullptr; float* dh = nullptr; float* dc = nullptr;
  // 16-bit mode may set this and give dgi/dgh of one step, [N, G*H]: the GEMMs read the 16-bit
  // copies, so only those need a whole chunk.
  bool dg_step_only = false;
  // Recompute each block's forward gates before its backward (FusedRnnArgs::gate_slots; the
  // RecurrentGemm of the forward, if any, must still hold this pass's packed W_hh).
  bool recompute = false;
  // With recompute: `gates` still holds the block the forward processed last (which the
  // backward processes first), so that one block needs no recompute.
  bool last_block_live = false;
  // fused_rnn_bias_partials(N, cell, H) floats: the per-block bias-gradient sums of a step.
  float* bias_partials = nullptr;
  // G*H * (C + H) floats: the weight gradients summed transposed over the chunks.
  float* wgrad_scratch = nullptr;
  // 16-bit mode only: [chunk, N, G*H] 16-bit copies of dgi (and of dgh for the GRU), the GEMM inputs.
  uint16_t* dgi_bf = nullptr; uint16_t* dgh_bf = nullptr;
  // Runs the per-step dh_prev GEMM with W_hh packed once (prepared by fused_rnn_backward);
  // null: gemm().
  RecurrentGemm* rec = nullptr;
};

}  // namespace seqtrain
