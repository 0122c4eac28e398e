// The recurrent cell kinds and their gate counts, shared by the fused kernels, oneDNN's
// primitives and the layers. Kept free of other includes because the per-ISA kernel files
// (kernels/) include it.
#pragma once
#include <cstdint>

namespace seqtrain {

enum class RnnCell { lstm, gru };

// static: a per-ISA kernel file's copy must never stand in for another's (kernels/level.h).
static inline constexpr int64_t rnn_gates(RnnCell c) { return c == RnnCell::lstm ? 4 : 3; }

}  // namespace seqtrain
