// Task templates: the YAML configs in <root>/templates/ that tasks are launched from. Each is
// described for the page's form (every schema key with the template's value, the schema's
// default and its documentation from docs/CONFIG.md) and checked by the CLI's own loader, so a
// broken template is listed as broken with the loader's message. Also the default templates a
// new root starts with, and the checks on a submitted task's overrides.
#pragma once
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace seqtrain::serve {

// One row of docs/CONFIG.md's key tables.
struct KeyDoc {
  std::string type, default_value, doc;
};
// Every documented key (from the copy of docs/CONFIG.md built into the binary).
const std::map<std::string, KeyDoc>& key_docs();

struct TemplateField {
  std::string key, value;  // value: YAML text as an override takes it
  std::string default_value, type, doc;  // the schema's default; type and text from docs/CONFIG.md
  bool in_template = false;  // set by the template file itself (not a default)
  bool path = false;         // a file path: overrides must stay inside the root
};

struct TemplateInfo {
  std::string name;
  std::string description;  // the file's leading comment lines
  std::string error;        // empty when the config loads
  std::vector<TemplateField> fields;
};

// Describes <dir>/<name>; a config that does not load gives `error` and no fields.
TemplateInfo describe_template(const std::filesystem::path& dir, const std::string& name);
// Every *.yaml / *.yml of `dir` with a valid name, by name.
std::vector<TemplateInfo> list_templates(const std::filesystem::path& dir);

// A submitted task's overrides (a JSON object of key -> value text) as the loader's "key=value"
// strings, a path value made absolute against `root` and refused (Error naming the key) when it
// leads outside it. Throws Error for anything but an object of scalars.
std::vector<std::string> override_args(const nlohmann::json& overrides, const std::filesystem::path& root);

// A new root gets templates/ (the battery LSTM forecaster, the FNN baseline, a char GPT and
// the set encoder) and the data/ they train on; nothing is written when templates/ exists.
// Returns what was written, for the log.
std::vector<std::string> install_default_templates(const std::filesystem::path& root);

}  // namespace seqtrain::serve
