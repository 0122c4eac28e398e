// The data-source registry: one entry per `data.source`, saying what kind of data it is and, for
// a series, how its table is read. Which keys apply, how a run is planned (train/data_plan.h),
// which commands can read new data of it (cli/) and what a message calls it were string compares
// of data.source in five files; they are questions to this table now, as the model registry
// (models/registry.h) is for model.type, so a new source is one entry here plus its plan.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/series.h"

namespace seqtrain {

enum class SourceKind {
  series,  // rows of one series in time order, cut into windows (csv, synthetic): forecasting
  arrays,  // samples given whole: npy X [N, T, F] with y and optional lengths
  text,    // a token stream: blocks of token ids with next-token targets
};

struct DataSource {
  std::string name;        // the data.source value
  SourceKind kind = SourceKind::series;
  std::string path_holds;  // what data.path must name ("CSV", "UTF-8 text"); empty: data.path is unused
  // For messages: "the CSV file 'x.csv'", "the synthetic source", ...
  std::function<std::string(const DataConfig&)> describe;
  // series: every column of the table, unnormalized (the columns are picked by dataset.cpp).
  std::function<Series(const DataConfig&)> read_all{};
  // series: reads only these columns when the source can (a CSV skips the others); empty: read_all.
  std::function<Series(const DataConfig&, const std::vector<std::string>&)> read_columns{};
  // series: whether this config reads many series (a fleet, data/fleet.h); empty: never.
  std::function<bool(const DataConfig&)> fleet{};
  // series: the units of the columns it makes, when it knows them (plots' axes): (column, unit).
  std::vector<std::pair<std::string, std::string>> units{};
};

const std::vector<DataSource>& data_sources();
std::vector<std::string> data_source_names();  // in table order: data.source's choices
// The entry of `name`, or an error listing the registered ones.
const DataSource& data_source(const std::string& name);
inline const DataSource& data_source(const DataConfig& d) { return data_source(d.source); }
// What the checks and commands ask most.
inline bool is_series(const DataConfig& d) { return data_source(d).kind == SourceKind::series; }
inline bool is_arrays(const DataConfig& d) { return data_source(d).kind == SourceKind::arrays; }
inline bool is_text(const DataConfig& d) { return data_source(d).kind == SourceKind::text; }
// "csv or synthetic": the names of the sources of a kind, for messages.
std::string source_names_of(SourceKind kind);

}  // namespace seqtrain
