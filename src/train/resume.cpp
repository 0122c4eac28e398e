#include "train/resume.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/load_model.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {
// (dotted key, value text) for every leaf line of to_yaml()'s canonical layout: two spaces of
// indent per level, "name:" opening a section, "name: value" a leaf, '#' comments.
std::vector<std::pair<std::string, std::string>> flatten_yaml(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> sections;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#') continue;
    const size_t colon = line.find(':', indent);
    if (colon == std::string::npos) continue;
    const std::string name = line.substr(indent, colon - indent);
    const size_t v = line.find_first_not_of(' ', colon + 1);
    sections.resize(std::min(sections.size(), indent / 2));
    if (v == std::string::npos) {
      sections.push_back(name);
      continue;
    }
    std::string key;
    for (const auto& s : sections) key += s + ".";
    out.emplace_back(key + name, line.substr(v));
  }
  return out;
}

}  // namespace

std::vector<ResumeCandidate> resume_candidates(const fs::path& ckpt_dir) {
  std::vector<std::string> dirs;
  if (fs::exists(ckpt_dir / "last")) dirs.push_back((ckpt_dir / "last").string());
  for (const auto& [n, path] : list_step_checkpoints(ckpt_dir.string())) dirs.push_back(path);
  std::vector<ResumeCandidate> out;
  std::string refused;
  for (const auto& d : dirs) {
    try {
      nlohmann::json st = read_checkpoint_state(d);
      ST_CHECK(st.contains("micro_steps") && st.contains("epoch") && st.contains("batch_in_epoch"),
               "{}/state.json has no training position (micro_steps, epoch, batch_in_epoch)", d);
      out.push_back({d, std::move(st)});
    } catch (const Error& e) {
      std::fprintf(stderr, "seqtrain: warning: not resuming from '%s': %s\n", d.c_str(), e.what());
      refused += "\n  " + std::string(e.what());
    }
  }
  // Checkpoints that all fail are not "no checkpoint yet": starting over would write over them.
  ST_CHECK(dirs.empty() || !out.empty(),
           "--resume: none of the {} checkpoint(s) in '{}' can be resumed:{}\nto start the run over instead, train "
           "without --resume and with --overwrite (which deletes them)", dirs.size(), ckpt_dir.string(), refused);
  auto key = [](const ResumeCandidate& c) {
    return std::make_tuple(c.state.at("micro_steps").get<int64_t>(), c.state.at("epoch").get<int64_t>(),
                           fs::path(c.dir).filename() == "last");
  };
  std::stable_sort(out.begin(), out.end(), [&](const ResumeCandidate& a, const ResumeCandidate& b) { return key(a) > key(b); });
  return out;
}

const std::vector<std::string>& resume_changeable_keys() {
  // runtime.device too: a checkpoint holds fp32 values on the host side of the file, whatever
  // device wrote it, so a GPU run goes on on the CPU and back (within rounding, not bit for bit).
  // runtime.tensorboard and runtime.profile only watch the run; runtime.memory_limit only sizes
  // train.batch_size: auto's search, which a resume never runs. train.zero only places the
  // optimizer's moments (checkpoints hold them whole), so a run resumes with it on or off.
  // runtime.cuda_graphs only says how the step is launched: captured or not, the same bits.
  static const std::vector<std::string> keys = {"train.epochs", "train.max_steps", "train.early_stopping.patience",
                                                "train.zero",
                                                "runtime.threads", "runtime.device", "runtime.profile",
                                                "runtime.tensorboard", "runtime.memory_limit", "runtime.cuda_graphs"};
  return keys;
}

std::vector<ConfigChange> config_differences(const std::string& before_yaml, const std::string& after_yaml) {
  const auto before = flatten_yaml(before_yaml), after = flatten_yaml(after_yaml);
  std::map<std::string, std::string> old(before.begin(), before.end());
  std::vector<ConfigChange> out;
  for (const auto& [k, v] : after) {
    auto it = old.find(k);
    if (it == old.end()) out.push_back({k, "(absent)", v});
    else if (it->second != v) out.push_back({k, it->second, v});
    if (it != old.end()) old.erase(it);
  }
  for (const auto& [k, v] : before)
    if (old.count(k)) out.push_back({k, v, "(absent)"});
  return out;
}

void check_resume_config(const nlohmann::json& st, const Config& config, const fs::path& run,
                         const std::string& ckpt, bool quiet) {
  const std::string stored = st.value("config", std::string());
  if (stored.empty()) return;  // written before checkpoints stored their config
  const auto& ok = resume_changeable_keys();
  std::string allowed;
  for (const auto& k : ok) allowed += (allowed.empty() ? "" : ", ") + k;
  // A key the checkpoint's config lacks was added to seqtrain after it was written; at its
  // default it means what that older version did, so it is no change.
  const auto defaults = flatten_yaml(to_yaml(Config{}));
  const std::map<std::string, std::string> default_of(defaults.begin(), defaults.end());
  for (const auto& c : config_differences(stored, to_yaml(config))) {
    if (c.before == "(absent)") {
      auto d = default_of.find(c.key);
      if (d != default_of.end() && d->second == c.after) continue;
    }
    if (std::find(ok.begin(), ok.end(), c.key) == ok.end())
      fail("{}: config key '{}' is {} but checkpoint '{}' was written with {}; a resumed run may only change {}. "
           "Restore the old value (in config.yaml or the --set) or start a new run with another --out",
           (run / "config.yaml").string(), c.key, c.after, ckpt, c.before, allowed);
    if (!quiet) std::fprintf(stderr, "seqtrain: resuming with %s changed: %s -> %s\n", c.key.c_str(),
                             c.before.c_str(), c.after.c_str());
  }
}

void check_resume_spec(const nlohmann::json& st, const ModelSpec& spec, const fs::path& run, const std::string& ckpt) {
  if (!st.is_object() || !st.contains("model_spec")) return;  // older checkpoint: see resume.h
  // Read the way load_model reads it, so both agree on what the checkpoint holds.
  nlohmann::json saved = spec_to_json(checkpoint_spec(ckpt, st)), now = spec_to_json(spec);
  // The device a run computes on is not part of the model (runtime.device may change on resume):
  // cpu and cuda:N hold the same model; only the reference oracle is another backend.
  if (saved.value("backend", "") != "reference" && now.value("backend", "") != "reference") {
    saved.erase("backend");
    now.erase("backend");
  }
  std::string diffs;
  for (const auto& [key, value] : now.items())
    if (!saved.contains(key) || saved.at(key) != value)
      diffs += fmt::format("{}{} is {} in the checkpoint but {} now", diffs.empty() ? "" : "; ", key,
                           saved.contains(key) ? saved.at(key).dump() : "(absent)", value.dump());
  if (diffs.empty()) return;
  fail("{}: checkpoint '{}' was trained as another model than this config builds on this data: {} (the "
       "checkpoint's is {}/state.json: model_spec). The data decides input_size, output_size and vocab_size, so a "
       "data file that changed since the run started shows here. Resume with the original config and data, or "
       "start a new run with another --out",
       (run / "config.yaml").string(), ckpt, diffs, ckpt);
}

}  // namespace seqtrain
