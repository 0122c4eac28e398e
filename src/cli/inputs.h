// What the inference commands (eval, predict, forecast) share about their inputs and outputs:
// which runs read windows of a table, a check that --input is the kind of file the run reads,
// and how a quantile level is named in the files they write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "data/sources.h"
#include "models/model.h"

namespace seqtrain {

// A forecast column's level suffix under train.loss quantile ("_q0.1"); "" for point forecasts.
std::string level_suffix(const std::vector<double>& quantiles, int64_t q);

// csv and synthetic runs: windows cut from a table (eval/predict/forecast take a CSV).
inline bool windowed(const Config& config) { return is_series(config.data); }

bool ends_with_text(const std::string& s, const std::string& suffix);

// A run's data section pointed at new data, as eval, predict, forecast and backtest read
// --input: that CSV (or glob of CSVs) as a csv source, every row of it (one split, no data.end).
// A fleet run's input names each row's series in the run's series column (data.series_id, or
// "series" as data export writes it) when it has that column; else each file is one series named
// by its stem, as a glob's files were in training.
DataConfig input_data(const DataConfig& run, const std::string& input);

// A trained forecaster and the data it is applied to (eval, predict, backtest).
struct Loaded {
  Config config;
  Dataset data;
  std::unique_ptr<Model> model;
};
struct CheckpointRef;
// Rebuilds the model and the data of a checkpoint; with `input`, the data is that CSV (input_data),
// scaled with the checkpoint's own normalization statistics and cut into windows over all its rows.
Loaded load_for_inference(const CheckpointRef& ck, const std::string& input);

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
