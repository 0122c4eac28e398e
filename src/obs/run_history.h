// RunHistory: a finished (or still running) run directory as `seqtrain report` reads it: the
// records of metrics.jsonl, summary.json when the run wrote one, and config.yaml flattened to
// dotted keys. Read through the files a run leaves, never through the trainer's types, so a
// report can compare runs of older seqtrain versions and runs still being written.
// Also the pieces the report is drawn from: a curve of one field of one split, and the config
// keys whose values differ between runs.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "obs/svg_plot.h"

namespace seqtrain {

struct RunHistory {
  std::string dir;   // as given on the command line
  std::string name;  // how the report labels it: the directory's name, made unique
  std::vector<nlohmann::json> records;  // metrics.jsonl, one object a line, in file order
  nlohmann::ordered_json summary;       // summary.json; null when the run has not written one
  std::map<std::string, std::string> config;  // config.yaml as dotted key -> value text
};

// Reads run directory `dir`. A path that is not a run directory (no metrics.jsonl or no
// config.yaml), a metrics line that is not a JSON object (except a torn last line of a run
// still writing it, which is left out) and unreadable YAML are Errors naming the file and a fix.
RunHistory read_run_history(const std::string& dir);

// Names each run by its directory's name; runs sharing a name are told apart by their paths.
void name_runs(std::vector<RunHistory>& runs);

// Field `y` of every record of `split` ("train", "val", "test", "data") against field `x`
// ("step", "epoch"), in file order; records where either is missing or not a number (a NaN
// loss is written as null) are left out.
std::vector<PlotPoint> curve(const RunHistory& run, std::string_view split, std::string_view y,
                             std::string_view x = "step");

// YAML text as dotted key -> value: nested maps become "a.b.c"; a scalar is its text, a list or
// a map inside a list its flow form ("[0.8, 0.1, 0.1]"); an empty map is "{}". `origin` names the
// text in errors.
std::map<std::string, std::string> flatten_yaml(const std::string& text, const std::string& origin);

// A config key whose values are not all equal, with each run's value (nullopt where a run's
// config lacks the key, e.g. one written by an older seqtrain).
struct ConfigDifference {
  std::string key;
  std::vector<std::optional<std::string>> values;  // one per run, in the runs' order
};
// The differing keys of `configs`, sorted by key; none for fewer than two configs.
std::vector<ConfigDifference> config_differences(const std::vector<std::map<std::string, std::string>>& configs);

}  // namespace seqtrain
