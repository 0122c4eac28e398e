// RnnCell: which recurrent cell a layer runs. A header of plain declarations: the per-ISA CPU
// kernels (backend/cpu/kernels/) include it, as do the device-neutral Backend and the nn layers,
// so nothing here may generate code the linker could share between instruction-set levels.
#pragma once
#include <cstdint>

namespace seqtrain {

enum class RnnCell { lstm, gru };

static inline constexpr int64_t rnn_gates(RnnCell c) { return c == RnnCell::lstm ? 4 : 3; }

}  // namespace seqtrain
