// What the inference commands (eval, predict, forecast) share about their inputs and outputs:
// which runs read windows of a table, a check that --input is the kind of file the run reads,
// and how a quantile level is named in the files they write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/sources.h"

namespace seqtrain {

// A forecast column's level suffix under train.loss quantile ("_q0.1"); "" for point forecasts.
std::string level_suffix(const std::vector<double>& quantiles, int64_t q);

// csv and synthetic runs: windows cut from a table (eval/predict/forecast take a CSV).
inline bool windowed(const Config& config) { return is_series(config.data); }

bool ends_with_text(const std::string& s, const std::string& suffix);

// An --input of the other kind (an .npy where a CSV is read, or the reverse) is an Error naming
// what the run reads (`what`), before its bytes are taken for the wrong format. `expected` is
// ".csv" or ".npy".
void check_input_format(const std::string& input, const std::string& expected, const std::string& what);

// An X .npy's sample lengths as the run was trained to read them: --lengths (a run trained on
// data.npy.train_len files needs it), or the run's data.npy.pad_value; errors name --lengths or
// --input and the fix (predict, eval, embed).
class NpySource;
void attach_lengths(NpySource& x, const Config& config, const std::string& lengths, const std::string& input);

}  // namespace seqtrain
