// What the inference commands (eval, predict, forecast) share about their inputs: which runs
// read windows of a table, and a check that --input is the kind of file the run reads.
#pragma once
#include <string>

#include "config/config.h"

namespace seqtrain {

// csv and synthetic runs: windows cut from a table (eval/predict/forecast take a CSV).
inline bool windowed(const Config& config) { return config.data.source == "csv" || config.data.source == "synthetic"; }

bool ends_with_text(const std::string& s, const std::string& suffix);

// An --input of the other kind (an .npy where a CSV is read, or the reverse) is an Error naming
// what the run reads (`what`), before its bytes are taken for the wrong format. `expected` is
// ".csv" or ".npy".
void check_input_format(const std::string& input, const std::string& expected, const std::string& what);

}  // namespace seqtrain
