// The cell type lives in the device-neutral backend/rnn_cell.h; this name stays for the CPU
// kernels that include it.
#pragma once
#include "backend/rnn_cell.h"
