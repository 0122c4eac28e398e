// The data-source table: see sources.h.
#include "data/sources.h"

#include "core/error.h"
#include "data/fleet.h"
#include "data/synthetic.h"

namespace seqtrain {

const std::vector<DataSource>& data_sources() {
  static const std::vector<DataSource> table = {
      {.name = "csv",
       .kind = SourceKind::series,
       .path_holds = "CSV",
       .describe = [](const DataConfig& d) {
         return (is_glob(d.path) ? "the CSV files of '" : "the CSV file '") + d.path + "'";
       },
       .read_all = [](const DataConfig& d) { return read_csv_source(d, {}); },
       .read_columns = [](const DataConfig& d, const std::vector<std::string>& columns) {
         return read_csv_source(d, columns);
       },
       .fleet = [](const DataConfig& d) { return !d.series_id.empty() || is_glob(d.path); }},
      {.name = "synthetic",
       .kind = SourceKind::series,
       .path_holds = "",
       .describe = [](const DataConfig&) { return std::string("the synthetic source"); },
       .read_all = [](const DataConfig& d) { return make_synthetic(d.synthetic); },
       .fleet = [](const DataConfig& d) { return d.synthetic.cells > 0; },
       .units = {{"voltage", "V"}, {"current", "A"}, {"temperature", "\u00b0C"}, {"soc", "0..1"},
                 {"capacity", "A\u00b7rows"}, {"resistance", "\u03a9"}, {"ambient", "\u00b0C"}}},
      {.name = "npy",
       .kind = SourceKind::arrays,
       .path_holds = "",
       .describe = [](const DataConfig&) { return std::string("the npy arrays (data.npy.*)"); }},
      {.name = "text",
       .kind = SourceKind::text,
       .path_holds = "UTF-8 text",
       .describe = [](const DataConfig& d) { return "the text file '" + d.path + "'"; }},
  };
  return table;
}

std::vector<std::string> data_source_names() {
  std::vector<std::string> out;
  for (const DataSource& s : data_sources()) out.push_back(s.name);
  return out;
}

const DataSource& data_source(const std::string& name) {
  for (const DataSource& s : data_sources())
    if (s.name == name) return s;
  std::string all;
  for (const DataSource& s : data_sources()) all += (all.empty() ? "" : ", ") + s.name;
  fail("config key 'data.source' is '{}', which is not a data source; the sources are {}", name, all);
}

std::string source_names_of(SourceKind kind) {
  std::vector<std::string> names;
  for (const DataSource& s : data_sources())
    if (s.kind == kind) names.push_back(s.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace seqtrain
