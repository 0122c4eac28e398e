// ParamGroup: torch.optim's parameter groups, chosen by tensor-name prefix: a group scales the
// learning rate of its tensors, may set their weight decay, or freezes them. The optimizer sees
// no names, only the one flat parameter buffer, so the groups are resolved once against the
// ParamStore's entries into GroupRuns, [begin, end) stretches of that buffer with one setting
// each, and Optimizer::set_groups() updates run by run. Tensors no group matches keep the
// optimizer's own settings. A group's prefix is a plain string prefix of the state_dict name
// ("rnn." or "encoder.layers.0."); the first group whose prefix matches a tensor wins, as a
// tensor can be in only one torch param group.
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace seqtrain {

class ParamStore;

struct ParamGroup {
  std::string prefix;
  double lr_scale = 1.0;  // the group's lr is the schedule's times this
  // Set: every tensor of the group decays by this (0: none), overriding the optimizer's
  // weight_decay and the model's decay policy for them. Unset: both apply as without groups.
  std::optional<double> weight_decay;
  bool frozen = false;  // no update, no moment change, no step count (torch: requires_grad False)
  bool operator==(const ParamGroup&) const = default;
};

// One stretch of the flat buffer and its group's settings (prefix aside).
struct GroupRun {
  size_t begin = 0, end = 0;
  double lr_scale = 1.0;
  std::optional<double> weight_decay;
  bool frozen = false;
  bool operator==(const GroupRun&) const = default;
};

// Each entry's group (by ParamStore entry index): the first of `groups` whose prefix starts the
// entry's name, or a default group (scale 1, no decay override, not frozen). A group whose
// prefix matches no tensor is an Error naming `key` (the config key the groups came from), the
// prefix and the model's tensor names.
std::vector<ParamGroup> entry_groups(const ParamStore& params, std::span<const ParamGroup> groups,
                                     const std::string& key = "train.param_groups");

// The entries' settings as runs over the flat buffer, in order, covering [0, params.size());
// neighbours with equal settings are one run. A buffer (ParamEntry::buffer) is frozen whatever its
// group says.
std::vector<GroupRun> group_runs(const ParamStore& params, std::span<const ParamGroup> per_entry);

// The model's tensor names for an error message, short: each distinct first component once
// ("rnn.", "head.", "cls_token").
std::string tensor_name_prefixes(const ParamStore& params);

// Sets each entry's frozen flag from its group (ParamStore::set_frozen), so the models skip the
// weight-gradient work of frozen tensors.
void apply_frozen(ParamStore& params, std::span<const ParamGroup> per_entry);

}  // namespace seqtrain
