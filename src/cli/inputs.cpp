// The inference commands' input checks. See inputs.h.
#include "cli/inputs.h"

#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/scalar.h"
#include "core/error.h"
#include "data/csv.h"
#include "data/fleet.h"
#include "data/npy.h"

namespace seqtrain {

std::string level_suffix(const std::vector<double>& quantiles, int64_t q) {
  return quantiles.empty() ? std::string() : fmt::format("_q{}", quantiles[q]);
}

bool ends_with_text(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

DataConfig input_data(const DataConfig& run, const std::string& input) {
  DataConfig d = run;
  d.source = "csv";
  d.path = std::filesystem::absolute(input).lexically_normal().string();
  d.split = {1.0, 0.0, 0.0};
  d.end.clear();
  if (!is_fleet(run)) return d;
  const std::string column = series_column_of(run);
  if (is_glob(d.path)) return d;  // the files as the run read them (with data.series_id's column, if any)
  const std::vector<std::string> header = read_csv_header(d.path);
  const bool has = std::find(header.begin(), header.end(), column) != header.end();
  d.series_id = has ? column : run.series_id;  // data.series_id missing from the file is read_csv's error
  return d;
}

void check_input_format(const std::string& input, const std::string& expected, const std::string& what) {
  std::ifstream f(input, std::ios::binary);
  char magic[6] = {};
  f.read(magic, 6);
  const bool npy = f.gcount() == 6 && std::string(magic, 6) == "\x93NUMPY";
  ST_CHECK(!npy || expected == ".npy",
           "--input {} is a NumPy .npy array, but this run was trained on CSV columns (data.source csv or synthetic): "
           "give {}",
           input, what);
  ST_CHECK(npy || expected != ".npy" || !f.gcount(),
           "--input {} is not a .npy array (it does not start with \\x93NUMPY), but this run was trained on npy "
           "arrays (data.source npy): give {}",
           input, what);
}

void attach_lengths(NpySource& x, const Config& config, const std::string& lengths, const std::string& input) {
  const NpyConfig& n = config.data.npy;
  if (!lengths.empty()) {
    ST_CHECK(!n.train_len.empty(), "--lengths {}: this run was trained without sample lengths files (data.npy."
             "train_len){}; leave --lengths out", lengths,
             n.pad_value != "none" ? " and finds each sample's length from data.npy.pad_value " + n.pad_value : "");
    x.read_lengths(lengths);
  } else if (!n.train_len.empty()) {
    fail("--input {}: this run was trained on samples of varying length (data.npy.train_len); give each sample's "
         "length with --lengths L.npy ([N] integers)", input);
  } else if (n.pad_value != "none") {
    x.lengths_from_padding(*parse_double(n.pad_value));
  }
}

}  // namespace seqtrain
