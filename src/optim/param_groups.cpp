#include "optim/param_groups.h"

#include "core/error.h"
#include "nn/params.h"

namespace seqtrain {

namespace {
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
}  // namespace

std::string tensor_name_prefixes(const ParamStore& params) {
  std::vector<std::string> seen;
  std::string out;
  for (const ParamEntry& e : params.entries()) {
    const size_t dot = e.name.find('.');
    const std::string p = dot == std::string::npos ? e.name : e.name.substr(0, dot + 1);
    bool known = false;
    for (const auto& s : seen) known = known || s == p;
    if (known) continue;
    seen.push_back(p);
    out += (out.empty() ? "" : ", ") + p;
  }
  return out;
}

std::vector<ParamGroup> entry_groups(const ParamStore& params, std::span<const ParamGroup> groups,
                                     const std::string& key) {
  const std::vector<ParamEntry>& entries = params.entries();
  std::vector<ParamGroup> out(entries.size());
  std::vector<bool> taken(entries.size(), false);
  for (const ParamGroup& g : groups) {
    bool matched = false;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!starts_with(entries[i].name, g.prefix)) continue;
      matched = true;
      if (taken[i]) continue;  // an earlier group has it
      out[i] = g;
      taken[i] = true;
    }
    ST_CHECK(matched, "config key '{}' has a group with prefix '{}', which matches none of the model's tensors; "
             "their names start with: {}",
             key, g.prefix, tensor_name_prefixes(params));
  }
  return out;
}

std::vector<GroupRun> group_runs(const ParamStore& params, std::span<const ParamGroup> per_entry) {
  const std::vector<ParamEntry>& entries = params.entries();
  ST_CHECK(per_entry.size() == entries.size(), "parameter groups: {} settings for {} tensors", per_entry.size(),
           entries.size());
  std::vector<GroupRun> runs;
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamGroup& g = per_entry[i];
    const size_t begin = entries[i].offset, end = begin + static_cast<size_t>(numel_of(entries[i].shape));
    if (begin == end) continue;
    GroupRun r{begin, end, g.lr_scale, g.weight_decay, g.frozen || entries[i].buffer};  // a buffer: always frozen
    if (!runs.empty() && runs.back().end == begin && runs.back().lr_scale == r.lr_scale &&
        runs.back().weight_decay == r.weight_decay && runs.back().frozen == r.frozen)
      runs.back().end = end;
    else
      runs.push_back(r);
  }
  return runs;
}

void apply_frozen(ParamStore& params, std::span<const ParamGroup> per_entry) {
  ST_CHECK(per_entry.size() == params.entries().size(), "parameter groups: {} settings for {} tensors",
           per_entry.size(), params.entries().size());
  for (size_t i = 0; i < per_entry.size(); ++i) params.set_frozen(i, per_entry[i].frozen);
}

}  // namespace seqtrain
