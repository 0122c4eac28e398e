// Warm starts from another run's weights with a prefix map and a skip list. See init_from.h.
#include "train/init_from.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

bool has_prefix(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "a, b, c" of up to 40 names, then how many more.
std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  const size_t shown = std::min<size_t>(names.size(), 40);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += fmt::format(" and {} more", names.size() - shown);
  return out.empty() ? "(none)" : out;
}

struct PrefixPair {
  std::string entry, from, to;
};

std::vector<PrefixPair> parse_map(const std::vector<std::string>& entries) {
  std::vector<PrefixPair> out;
  for (const auto& e : entries) {
    const size_t eq = e.find('=');
    ST_CHECK(eq != std::string::npos, "model.init_from_map entry '{}' is not a from=to pair (e.g. encoder.=rnn.)", e);
    out.push_back({e, e.substr(0, eq), e.substr(eq + 1)});
  }
  return out;
}

// A source tensor's name in the model's terms: the longest matching `from` replaced by its `to`.
std::string mapped_name(const std::string& name, const std::vector<PrefixPair>& map) {
  const PrefixPair* best = nullptr;
  for (const auto& p : map)
    if (has_prefix(name, p.from) && (!best || p.from.size() > best->from.size())) best = &p;
  return best ? best->to + name.substr(best->from.size()) : name;
}

bool skipped(const std::string& name, const std::vector<std::string>& skip) {
  for (const auto& s : skip)
    if (has_prefix(name, s)) return true;  // an exact name is its own prefix
  return false;
}

// Every map entry must match a source tensor, every skip entry a model or (mapped) source tensor.
void check_entries_match(const SafetensorsFile& file, const ParamStore& params, const std::vector<PrefixPair>& map,
                         const std::vector<std::string>& skip) {
  std::vector<std::string> source, model, mapped;
  for (const auto& t : file.tensors) source.push_back(t.name);
  for (const auto& e : params.entries()) model.push_back(e.name);
  for (const auto& n : source) mapped.push_back(mapped_name(n, map));
  for (const auto& p : map) {
    const bool any = std::any_of(source.begin(), source.end(), [&](const std::string& n) { return has_prefix(n, p.from); });
    ST_CHECK(any, "model.init_from_map entry '{}' matches no tensor of '{}' (no name starts with '{}'); its tensors "
             "are: {}", p.entry, file.path, p.from, name_list(source));
  }
  for (const auto& s : skip) {
    auto hit = [&](const std::string& n) { return has_prefix(n, s); };
    ST_CHECK(std::any_of(model.begin(), model.end(), hit) || std::any_of(mapped.begin(), mapped.end(), hit),
             "model.init_from_skip entry '{}' names no tensor of the model or of '{}' (after model.init_from_map); "
             "the model's tensors are: {}", s, file.path, name_list(model));
  }
}

// The source tensor (by model name) that fills each model tensor; checks collisions, the
// model's side of strict mode and shapes.
std::map<std::string, const NamedTensor*> match_tensors(const SafetensorsFile& file, const ParamStore& params,
                                                        const std::vector<PrefixPair>& map,
                                                        const InitFromOptions& opt, InitFromReport& report) {
  std::map<std::string, const NamedTensor*> by_model_name;
  std::vector<std::string> model_names;
  for (const auto& e : params.entries()) model_names.push_back(e.name);
  for (const auto& t : file.tensors) {
    const std::string name = mapped_name(t.name, map);
    if (skipped(name, opt.skip)) continue;
    const ParamEntry* e = params.find(name);
    if (!e) {
      ST_CHECK(!opt.strict, "model.init_from: tensor '{}' of '{}'{} is not a tensor of the model; map it with "
               "model.init_from_map, leave it out with model.init_from_skip, or set model.init_from_strict: false. "
               "The model's tensors are: {}", t.name, file.path,
               name == t.name ? "" : fmt::format(" (mapped to '{}')", name), name_list(model_names));
      report.unused.push_back(name);
      continue;
    }
    auto [it, fresh] = by_model_name.emplace(name, &t);
    ST_CHECK(fresh, "model.init_from_map maps both '{}' and '{}' of '{}' onto the model's tensor '{}'; change the map "
             "so one source tensor fills it", it->second->name, t.name, file.path, name);
    ST_CHECK(t.shape == e->shape, "model.init_from: tensor '{}' of '{}' has shape {} but the model's '{}' has shape "
             "{}; the two models differ in size (or map it elsewhere, or skip it with model.init_from_skip)",
             t.name, file.path, shape_str(t.shape), name, shape_str(e->shape));
  }
  for (const auto& e : params.entries()) {
    if (by_model_name.count(e.name)) continue;
    if (skipped(e.name, opt.skip)) { report.skipped.push_back(e.name); continue; }
    ST_CHECK(!opt.strict, "model.init_from: '{}' has no tensor for the model's '{}'{}; map one onto it with "
             "model.init_from_map, leave it at its initialisation with model.init_from_skip, or set "
             "model.init_from_strict: false", file.path, e.name, map.empty() ? "" : " (after model.init_from_map)");
    report.unfilled.push_back(e.name);
  }
  return by_model_name;
}

}  // namespace

InitFromOptions init_from_options(const ModelConfig& model) {
  return InitFromOptions{model.init_from_map, model.init_from_skip, model.init_from_strict};
}

InitFromReport init_from(const std::string& source, ParamStore& params, const InitFromOptions& options) {
  const std::string path = fs::is_directory(source) ? verified_model_file(source) : source;
  return init_from(read_safetensors(path), params, options);
}

InitFromReport init_from(const SafetensorsFile& file, ParamStore& params, const InitFromOptions& options) {
  const std::vector<PrefixPair> map = parse_map(options.map);
  check_entries_match(file, params, map, options.skip);
  InitFromReport report;
  const auto fill = match_tensors(file, params, map, options, report);
  // Convert everything before writing anything, so a failed conversion leaves params untouched.
  std::vector<std::pair<const ParamEntry*, std::vector<float>>> values;
  for (const auto& e : params.entries()) {
    auto it = fill.find(e.name);
    if (it == fill.end()) continue;
    values.emplace_back(&e, it->second->to_f32());
    report.filled.push_back(e.name);
  }
  for (const auto& [e, v] : values) params.write_params(v, e->offset);
  return report;
}

}  // namespace seqtrain
