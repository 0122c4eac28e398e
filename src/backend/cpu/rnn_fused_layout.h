// Where the fused RNN kernels keep a step's rows: shared by the layer driver (rnn_fused.cpp)
// and the gate passes compiled once per ISA level (kernels/gates.cpp). `static inline` so that
// each level keeps its own copies (kernels/level.h says why).
#pragma once
#include <cstdint>

#include "backend/cpu/rnn_fused_args.h"

namespace seqtrain::rnn_fused_layout {

// Time index of the s-th processed step.
static inline int64_t time_of(const FusedRnnArgs& a, int64_t s) { return a.reverse ? a.T - 1 - s : s; }

// Offset of step t's gate rows in a buffer of blocks of `slots` steps (the whole sequence when
// 0): blocks are aligned to multiples of it, so step t sits in slot t % slots.
static inline int64_t gate_offset(const FusedRnnArgs& a, int64_t slots, int64_t t) {
  return (t % (slots > 0 ? slots : a.T)) * a.N * rnn_gates(a.cell) * a.H;
}
// Step t's gates: the fp32 ones (gate_slots) and the 16-bit saved ones (gates_half, half_slots).
static inline float* gates_at(const FusedRnnArgs& a, int64_t t) { return a.gates + gate_offset(a, a.gate_slots, t); }
static inline uint16_t* half_gates_at(const FusedRnnArgs& a, int64_t t) {
  return a.gates_half + gate_offset(a, a.half_slots, t);
}

// Whether row n is padding at time t (past its FusedRnnArgs::lengths).
static inline bool padded(const FusedRnnArgs& a, int64_t t, int64_t n) { return a.lengths && t >= a.lengths[n]; }

// Parallel over batch rows only when there is enough work to pay for waking the team.
static inline bool worth_threads(int64_t n) { return n >= 8192; }

// Bias gradients are summed inside the backward gate passes: the rows of a step go in blocks
// of kRowBlock, each block's column sums land in its own row of FusedRnnGrads::bias_partials,
// and add_partials adds the blocks in order. The blocks depend on N only, so the summation
// order is the same for any thread count, and no second pass over the gate gradients is needed.
constexpr int64_t kRowBlock = 8;
static inline int64_t row_blocks(int64_t N) { return (N + kRowBlock - 1) / kRowBlock; }

}  // namespace seqtrain::rnn_fused_layout
