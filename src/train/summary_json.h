// The end-of-run summary as the run directory keeps it (summary.json) and `seqtrain train`
// prints it: one ordered list of (key, value text) serves both, so the two never disagree.
// A figure the run does not have (no test split, no last-value baseline outside windowed
// forecasting, no validation yet) is absent from the printout and null in the file, never 0 or inf.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train/trainer.h"

namespace seqtrain {

// "key: value" lines for the console, e.g. ("best_val_loss", "0.012345") or ("best_val_loss",
// "none yet") when the run stopped before its first validation.
std::vector<std::pair<std::string, std::string>> summary_lines(const TrainSummary& s);
// The same as JSON (numbers as numbers, absent figures null), with the seqtrain build that ran.
nlohmann::ordered_json summary_json(const TrainSummary& s);

}  // namespace seqtrain
