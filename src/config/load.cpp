// load_config: YAML file + overrides -> validated Config.
// Values are assigned key by key through the schema in fields.h; each assignment records
// where the value came from ("file:line:col" or "override 'k=v'") so that the cross-key
// checks at the end can point at the line the user has to change.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/config.h"
#include "config/fields.h"
#include "config/frequency.h"
#include "config/scalar.h"
#include "config/suggest.h"
#include "data/timestamps.h"
#include "backend/cuda_plugin.h"
#include "core/error.h"
#include "config/model_config.h"

namespace seqtrain {
namespace {

// runtime.device against this machine, at load (before a run directory is touched): a GPU asked
// for by name must be usable now; auto never fails (it falls back to the CPU). `where` is the
// key's origin (file:line or the override).
void check_device(const Config& c, const std::string& where) {
  try {
    backend_for(c.runtime.backend, c.runtime.device);
    if (c.runtime.device.substr(0, 4) != "cuda") return;
    const CudaAvailability& a = cuda_availability();
    const int want = resolve_device(c.runtime.device);
    ST_CHECK(a.devices > 0, "config key 'runtime.device' is '{}' but no GPU can be used here: {}. Fix: "
             "runtime.device: cpu (or auto, which uses a GPU when there is one)", c.runtime.device, a.why_none);
    ST_CHECK(want < a.devices, "config key 'runtime.device' is '{}' but this machine has {} GPU(s): use cuda:0.."
             "cuda:{}", c.runtime.device, a.devices, a.devices - 1);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

namespace fs = std::filesystem;
using namespace config_detail;

std::string mark_str(const std::string& file, const YAML::Mark& m) {
  if (m.is_null()) return file;
  return fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
}

// How a node looks to the user, for the "got ..." half of a message.
std::string describe_node(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing (null)";
  }
}

std::string fmt_bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string describe_range(const Range& r, bool integer) {
  const char* what = integer ? "an integer" : "a number";
  bool has_lo = !std::isinf(r.lo), has_hi = !std::isinf(r.hi);
  if (!has_lo && !has_hi) return what;
  if (has_lo && !has_hi) return fmt::format("{} {} {}", what, r.lo_open ? ">" : ">=", fmt_bound(r.lo));
  if (!has_lo) return fmt::format("{} {} {}", what, r.hi_open ? "<" : "<=", fmt_bound(r.hi));
  return fmt::format("{} in {}{}, {}{}", what, r.lo_open ? "(" : "[", fmt_bound(r.lo), fmt_bound(r.hi),
                     r.hi_open ? ")" : "]");
}

// Visitor that only records key names.
struct CollectKeys {
  std::vector<std::string> keys;
  std::vector<std::string> paths;  // the keys whose value is a file path
  template <typename... Rest> void field(const char* key, Rest&&...) { keys.emplace_back(key); }
  void field(const char* key, const std::string&, PathTag) {
    keys.emplace_back(key);
    paths.emplace_back(key);
  }
};

std::vector<std::string> all_keys() {
  CollectKeys c;
  const Config cfg;
  visit_fields(cfg, c);
  return c.keys;
}

std::set<std::string> all_sections() {
  std::set<std::string> out;
  for (const auto& k : all_keys())
    for (std::string s = section_of(k); !s.empty(); s = section_of(s)) out.insert(s);
  return out;
}

// Keys and sections directly inside `section`, for "valid keys in 'train' are ..." hints.
std::vector<std::string> children_of(const std::string& section) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& k : all_keys()) {
    std::string prefix = section.empty() ? "" : section + ".";
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = k.substr(prefix.size());
    std::string child = rest.substr(0, rest.find('.'));
    if (seen.insert(child).second) out.push_back(child);
  }
  return out;
}

std::vector<std::string> suggestion_pool() {
  std::vector<std::string> pool = all_keys();
  for (const auto& s : all_sections()) pool.push_back(s);
  return pool;
}

[[noreturn]] void unknown_key(const std::string& where, const std::string& key) {
  std::string section = section_of(key);
  fail("{}: unknown config key '{}'{}; valid keys{} are: {}. Fix the spelling or remove the key "
       "(docs/CONFIG.md lists every key)",
       where, key, did_you_mean(key, suggestion_pool()),
       section.empty() ? std::string(" at the top level") : " in '" + section + "'",
       quoted_list(children_of(section)));
}

// Visitor that assigns one YAML node to the field named `key`.
class Assign {
 public:
  // `file` is the config file the node comes from ("" for overrides): list items then get
  // their own line:col.
  Assign(const std::string& key, const YAML::Node& node, const std::string& where, const fs::path& base_dir,
         const std::string& file)
      : key_(key), node_(node), where_(where), base_dir_(base_dir), file_(file) {}

  bool found() const { return found_; }

  void field(const char* key, int64_t& x, Range r) {
    if (!match(key)) return;
    auto v = parse_int64(scalar(describe_range(r, true)));
    if (!v || !r.contains(static_cast<double>(*v))) bad(describe_range(r, true));
    x = *v;
  }
  void field(const char* key, uint64_t& x) {
    if (!match(key)) return;
    auto v = parse_uint64(scalar("a non-negative integer"));
    if (!v) bad("a non-negative integer below 2^64");
    x = *v;
  }
  void field(const char* key, double& x, Range r) {
    if (!match(key)) return;
    auto v = parse_double(scalar(describe_range(r, false)));
    if (!v || !std::isfinite(*v) || !r.contains(*v)) bad(describe_range(r, false));
    x = *v;
  }
  void field(const char* key, bool& x) {
    if (!match(key)) return;
    auto v = parse_bool(scalar("true or false"));
    if (!v) bad("true or false");
    x = *v;
  }
  void field(const char* key, std::string& x, Choices choices) {
    if (!match(key)) return;
    std::vector<std::string> options(choices.begin(), choices.end());
    std::string expected = "one of " + quoted_list(options);
    std::string v = scalar(expected);
    for (const auto& o : options)
      if (v == o) { x = v; return; }
    fail("{}: config key '{}' expects {}, got '{}'{}", where_, key_, expected, v, did_you_mean(v, options));
  }
  void field(const char* key, std::string& x, CountOrAuto) {
    if (!match(key)) return;
    std::string v = scalar("an integer >= 0 or auto");
    if (v != "auto") {
      auto n = parse_int64(v);
      if (!n || *n < 0) fail("{}: config key '{}' expects an integer >= 0 or auto, got '{}'", where_, key_, v);
    }
    x = v;
  }
  void field(const char* key, int64_t& x, CountAtLeastOneOrAuto) {
    if (!match(key)) return;
    const std::string v = scalar("an integer >= 1 or auto");
    if (v == "auto") { x = kAutoBatch; return; }
    const auto n = parse_int64(v);
    if (!n || *n < 1) fail("{}: config key '{}' expects an integer >= 1 or auto, got '{}'", where_, key_, v);
    x = *n;
  }
  void field(const char* key, std::string& x, BytesOrAuto) {
    if (!match(key)) return;
    const char* expected = "a size in bytes with an optional unit (512MiB, 8GiB, 2GB, 1e9) or auto";
    const std::string v = scalar(expected);
    if (v != "auto" && !parse_bytes(v)) fail("{}: config key '{}' expects {}, got '{}'", where_, key_, expected, v);
    x = v;
  }
  void field(const char* key, std::string& x, NumberOrNone) {
    if (!match(key)) return;
    std::string v = scalar("a number or none");
    if (v != "none") {
      auto d = parse_double(v);
      if (!d || !std::isfinite(*d)) fail("{}: config key '{}' expects a finite number or none, got '{}'", where_, key_, v);
    }
    x = v;
  }
  void field(const char* key, std::string& x, EndTag) {
    if (!match(key)) return;
    if (node_.IsNull()) { x.clear(); return; }
    const char* expected = "a row count (N: each series' first N rows; -N: all but its last N) or a date / date-time";
    std::string v = scalar(expected);
    const auto n = parse_int64(v);
    if (!v.empty() && (n ? *n == 0 : !parse_timestamp(v) || parse_double(v)))
      fail("{}: config key '{}' expects {} (empty: all of the data), got '{}'", where_, key_, expected, v);
    x = v;
  }
  void field(const char* key, std::string& x, FrequencyTag) {
    if (!match(key)) return;
    const char* expected = "a frequency: N or Nu (every N optimizer updates) or Ne (every N epochs), e.g. 500u or 1e";
    std::string v = scalar(expected);
    if (!try_parse_frequency(v)) fail("{}: config key '{}' expects {}; got '{}'", where_, key_, expected, v);
    x = v;
  }
  void field(const char* key, std::string& x, PathTag) {
    if (!match(key)) return;
    if (node_.IsNull()) { x.clear(); return; }
    std::string v = scalar("a file path");
    // Stored absolute so a resolved config.yaml in a run directory means the same file.
    x = v.empty() ? v : (fs::path(v).is_absolute() ? fs::path(v) : fs::absolute(base_dir_ / v)).lexically_normal().string();
  }
  void field(const char* key, std::string& x, ColumnTag) {
    if (!match(key)) return;
    x = node_.IsNull() ? std::string() : scalar("a column name");
  }
  void field(const char* key, std::vector<std::string>& x) {
    if (!match(key)) return;
    const char* expected = "a list of column names like [voltage, current]";
    std::vector<std::string> out;
    if (node_.IsScalar()) {
      out.push_back(node_.Scalar());  // a single name is a one-element list
    } else if (node_.IsSequence()) {
      for (size_t i = 0; i < node_.size(); ++i) {
        const YAML::Node item = node_[i];
        if (!item.IsScalar())
          fail("{}: config key '{}' expects {}; item {} is {}", item_where(item), key_, expected, i,
               describe_node(item));
        out.push_back(item.Scalar());
      }
    } else if (!node_.IsNull()) {
      bad(expected);
    }
    std::set<std::string> seen;
    for (const auto& name : out) {
      if (name.empty()) fail("{}: config key '{}' has an empty column name; remove it", where_, key_);
      if (!seen.insert(name).second)
        fail("{}: config key '{}' names column '{}' twice; list each column once", where_, key_, name);
    }
    x = std::move(out);
  }
  void field(const char* key, std::vector<int64_t>& x, Range r) {
    if (!match(key)) return;
    const std::string expected = "a list of integers, each " + describe_range(r, true) + ", like [24, 168]";
    std::vector<int64_t> out;
    for (const auto& [text, node] : scalar_items(expected.c_str())) {
      const auto v = parse_int64(text);
      if (!v || !r.contains(static_cast<double>(*v)))
        fail("{}: config key '{}' expects {}; got '{}'", item_where(node), key_, expected, text);
      if (std::find(out.begin(), out.end(), *v) != out.end())
        fail("{}: config key '{}' lists {} twice; list each once", item_where(node), key_, *v);
      out.push_back(*v);
    }
    x = std::move(out);
  }
  void field(const char* key, std::vector<int64_t>& x, SizeList) {
    if (!match(key)) return;
    const char* expected = "a non-empty list of integers, each >= 1, like [8, 5, 3]";
    std::vector<int64_t> out;
    for (const auto& [text, node] : scalar_items(expected)) {
      const auto v = parse_int64(text);
      if (!v || *v < 1) fail("{}: config key '{}' expects {}; got '{}'", item_where(node), key_, expected, text);
      out.push_back(*v);
    }
    if (out.empty()) fail("{}: config key '{}' is empty; it expects {}", where_, key_, expected);
    x = std::move(out);
  }
  void field(const char* key, std::vector<double>& x, Range r) {
    if (!match(key)) return;
    const std::string expected = "an increasing list of numbers, each " + describe_range(r, false) + ", like [0.1, 0.5, 0.9]";
    std::vector<double> out;
    for (const auto& [text, node] : scalar_items(expected.c_str())) {
      const auto v = parse_double(text);
      if (!v || !std::isfinite(*v) || !r.contains(*v))
        fail("{}: config key '{}' expects {}; got '{}'", item_where(node), key_, expected, text);
      if (!out.empty() && *v <= out.back())
        fail("{}: config key '{}' expects {}; {} {} {}: list each level once, in increasing order", item_where(node),
             key_, expected, text, *v == out.back() ? "repeats" : "comes after", out.back());
      out.push_back(*v);
    }
    if (out.empty()) fail("{}: config key '{}' is empty; it expects {}", where_, key_, expected);
    x = std::move(out);
  }
  void field(const char* key, std::vector<std::string>& x, PrefixMap) {
    if (!match(key)) return;
    const char* expected = "a list of \"from=to\" tensor-name prefix pairs like [\"encoder.=rnn.\"] (or a mapping "
                           "{\"encoder.\": \"rnn.\"})";
    std::vector<Item> items;
    if (node_.IsMap()) {
      for (auto it = node_.begin(); it != node_.end(); ++it) {
        const YAML::Node k = it->first, v = it->second;  // copies: it-> yields a temporary proxy
        if (!k.IsScalar() || !(v.IsScalar() || v.IsNull()))
          fail("{}: config key '{}' expects {}; the entry for {} maps to {}", item_where(k), key_, expected,
               describe_node(k), describe_node(v));
        items.push_back({k.Scalar() + "=" + (v.IsNull() ? std::string() : v.Scalar()), k});
      }
    } else {
      items = scalar_items(expected);
    }
    std::set<std::string> froms;
    std::vector<std::string> out;
    for (const auto& [text, node] : items) {
      const size_t eq = text.find('=');
      if (eq == std::string::npos || text.find('=', eq + 1) != std::string::npos)
        fail("{}: config key '{}' entry '{}' is not one from=to pair; write the prefix of the source's tensor "
             "names, '=', and the model's prefix that replaces it, e.g. encoder.=rnn.", item_where(node), key_, text);
      if (eq == 0 && eq + 1 == text.size())
        fail("{}: config key '{}' entry '=' maps nothing; remove it", item_where(node), key_);
      if (!froms.insert(text.substr(0, eq)).second)
        fail("{}: config key '{}' maps the prefix '{}' twice; keep one entry for it", item_where(node), key_,
             text.substr(0, eq));
      out.push_back(text);
    }
    x = std::move(out);
  }
  void field(const char* key, std::vector<std::string>& x, NameList) {
    if (!match(key)) return;
    std::set<std::string> seen;
    std::vector<std::string> out;
    for (const auto& [name, node] : scalar_items("a list of tensor names or name prefixes like [head.]")) {
      if (name.empty()) fail("{}: config key '{}' has an empty tensor name; remove it", item_where(node), key_);
      if (!seen.insert(name).second)
        fail("{}: config key '{}' names '{}' twice; list each once", item_where(node), key_, name);
      out.push_back(name);
    }
    x = std::move(out);
  }
  void field(const char* key, std::vector<ParamGroup>& x) {
    if (!match(key)) return;
    const char* expected = "a list of parameter groups like [{prefix: rnn., lr_scale: 0.1, weight_decay: 0.0, "
                           "frozen: false}]";
    if (node_.IsNull()) { x.clear(); return; }
    if (!node_.IsSequence()) bad(expected);
    std::vector<ParamGroup> out;
    for (size_t i = 0; i < node_.size(); ++i) {
      const YAML::Node item = node_[i];
      if (!item.IsMap())
        fail("{}: config key '{}' expects {}; item {} is {}", item_where(item), key_, expected, i, describe_node(item));
      ParamGroup g;
      bool has_prefix = false;
      for (auto it = item.begin(); it != item.end(); ++it) {
        const YAML::Node k = it->first, v = it->second;  // copies: it-> yields a temporary proxy
        const std::string name = k.IsScalar() ? k.Scalar() : std::string();
        const std::string at = item_where(v.Mark().is_null() ? k : v);
        auto need = [&](bool ok, const char* what) {
          if (!ok)
            fail("{}: config key '{}' item {}: '{}' expects {}, got {}", at, key_, i, name, what, describe_node(v));
        };
        if (name == "prefix") {
          need(v.IsScalar(), "a tensor-name prefix like rnn.");
          g.prefix = v.Scalar();
          has_prefix = true;
        } else if (name == "lr_scale") {
          const auto d = v.IsScalar() ? parse_double(v.Scalar()) : std::nullopt;
          need(d && std::isfinite(*d) && *d >= 0, "a number >= 0");
          g.lr_scale = *d;
        } else if (name == "weight_decay") {
          if (v.IsNull() || (v.IsScalar() && v.Scalar() == "none")) {
            g.weight_decay.reset();
            continue;
          }
          const auto d = v.IsScalar() ? parse_double(v.Scalar()) : std::nullopt;
          need(d && std::isfinite(*d) && *d >= 0, "a number >= 0 (or none: the optimizer's)");
          g.weight_decay = *d;
        } else if (name == "frozen") {
          const auto b = v.IsScalar() ? parse_bool(v.Scalar()) : std::nullopt;
          need(b.has_value(), "true or false");
          g.frozen = *b;
        } else {
          fail("{}: config key '{}' item {} has an unknown field '{}'{}; a group has prefix, lr_scale, "
               "weight_decay and frozen", item_where(k), key_, i, name,
               did_you_mean(name, {"prefix", "lr_scale", "weight_decay", "frozen"}));
        }
      }
      if (!has_prefix)
        fail("{}: config key '{}' item {} has no prefix; give the tensor-name prefix it applies to, e.g. "
             "{{prefix: rnn., lr_scale: 0.1}}", item_where(item), key_, i);
      for (const ParamGroup& o : out)
        if (o.prefix == g.prefix)
          fail("{}: config key '{}' has two groups with prefix '{}'; only the first would ever match: keep one",
               item_where(item), key_, g.prefix);
      out.push_back(std::move(g));
    }
    x = std::move(out);
  }
  void field(const char* key, std::array<double, 3>& x) {
    if (!match(key)) return;
    const char* expected = "a list of three fractions [train, val, test], e.g. [0.8, 0.1, 0.1]";
    if (!node_.IsSequence() || node_.size() != 3) bad(expected);
    std::array<double, 3> out{};
    for (size_t i = 0; i < 3; ++i) {
      const YAML::Node item = node_[i];
      std::optional<double> v;
      if (item.IsScalar()) v = parse_double(item.Scalar());
      if (!v || !std::isfinite(*v) || *v < 0 || *v > 1)
        fail("{}: config key '{}' item {} expects a number in [0, 1], got {}", item_where(item), key_, i,
             describe_node(item));
      out[i] = *v;
    }
    x = out;
  }

 private:
  bool match(const char* key) {
    if (key_ != key) return false;
    found_ = true;
    return true;
  }
  // A list's scalar items with their nodes (for positions); a single scalar is a one-item list.
  struct Item {
    std::string text;
    YAML::Node node;
  };
  std::vector<Item> scalar_items(const char* expected) {
    std::vector<Item> out;
    if (node_.IsScalar()) {
      out.push_back({node_.Scalar(), node_});
    } else if (node_.IsSequence()) {
      for (size_t i = 0; i < node_.size(); ++i) {
        const YAML::Node item = node_[i];
        if (!item.IsScalar())
          fail("{}: config key '{}' expects {}; item {} is {}", item_where(item), key_, expected, i, describe_node(item));
        out.push_back({item.Scalar(), item});
      }
    } else if (!node_.IsNull()) {
      bad(expected);
    }
    return out;
  }
  // The node's text, or an error when it is not a scalar at all.
  std::string scalar(const std::string& expected) {
    if (!node_.IsScalar()) bad(expected);
    return node_.Scalar();
  }
  [[noreturn]] void bad(const std::string& expected) {
    fail("{}: config key '{}' expects {}, got {}", where_, key_, expected, describe_node(node_));
  }
  // List items carry their own marks inside a file; overrides have no finer location.
  std::string item_where(const YAML::Node& item) const {
    return file_.empty() || item.Mark().is_null() ? where_ : mark_str(file_, item.Mark());
  }

  const std::string& key_;
  const YAML::Node& node_;
  const std::string& where_;
  const fs::path& base_dir_;
  const std::string& file_;
  bool found_ = false;
};

class Loader {
 public:
  Loader(const std::string& name, const fs::path& base_dir) : name_(name), base_dir_(base_dir) {
    for (const auto& k : all_keys()) leaves_.insert(k);
    sections_ = all_sections();
  }

  void load_text(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail("{}: YAML syntax error: {}. Fix the YAML at that position (indentation, a missing ':' "
           "or an unclosed bracket or quote are the usual causes)",
           mark_str(name_, e.mark), e.msg);
    }
    if (root.IsNull()) return;  // an empty file means all defaults
    if (!root.IsMap())
      fail("{}: the config must be a mapping of keys (like 'train:' and 'data:'), got {}",
           mark_str(name_, root.Mark()), describe_node(root));
    walk(root, "");
  }

  void apply_override(const std::string& text) {
    auto eq = text.find('=');
    std::string where = "override '" + text + "'";
    if (eq == std::string::npos || eq == 0)
      fail("{}: an override must look like key=value, e.g. train.optimizer.lr=0.01", where);
    std::string key = trim(text.substr(0, eq));
    std::string value = text.substr(eq + 1);
    if (sections_.count(key))
      fail("{}: '{}' is a section, not a key; set one of its keys instead: {}", where, key,
           quoted_list(children_of(key)));
    if (!leaves_.count(key)) unknown_key(where, key);
    YAML::Node node;
    try {
      node = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      fail("{}: the value '{}' is not valid YAML ({}); quote it or write a list as [a, b]", where, value, e.msg);
    }
    if (node.IsMap())
      fail("{}: the value of an override must be a scalar or a list like [a, b], got a mapping", where);
    // Relative paths given on the command line mean the working directory.
    assign(key, node, where, fs::current_path(), "");
  }

  // Checks that involve more than one key, after the file and all overrides are in.
  void check(const Config& c) const {
    const auto& d = c.data;
    double sum = d.split[0] + d.split[1] + d.split[2];
    if (sum > 1 + 1e-9)
      fail("{}: config key 'data.split' fractions [{}, {}, {}] sum to {:.6g}, more than 1; make them sum to "
           "at most 1",
           origin("data.split"), d.split[0], d.split[1], d.split[2], sum);
    if (d.split[0] <= 0)
      fail("{}: config key 'data.split' gives the train split a fraction of 0; training needs a "
           "positive first fraction, e.g. [0.8, 0.1, 0.1]",
           origin("data.split"));
    const DataSource& source = data_source(d);
    if (!source.path_holds.empty() && d.path.empty())
      fail("{}: config key 'data.path' is empty but data.source is '{}'; set data.path to the {} file",
           origin("data.path"), d.source, source.path_holds);
    if (d.targets.empty())
      fail("{}: config key 'data.targets' is empty; name at least one column to predict", origin("data.targets"));
    const auto& t = c.train;
    const bool npy = source.kind == SourceKind::arrays;
    if (npy) check_npy(c);
    const bool text = source.kind == SourceKind::text;
    if (!npy && !text && t.loss == "cross_entropy")
      fail("{}: config key 'train.loss' is cross_entropy, which needs class labels: use data.source npy with a "
           "label y of shape [N] (data.npy.train_y), or a regression loss (mse, mae, huber)", origin("train.loss"));
    if (text && t.loss != "cross_entropy")
      fail("{}: config key 'train.loss' is {} but data.source text trains next-token prediction; set "
           "train.loss: cross_entropy", origin("train.loss"), t.loss);
    check_sampling(d);
    check_task(c);
    if (text) {
      const auto& a = d.augment;
      const char* on = a.jitter_sigma > 0 ? "data.augment.jitter_sigma" : a.scale_sigma > 0 ? "data.augment.scale_sigma"
                       : a.warp_sigma > 0 ? "data.augment.warp_sigma" : a.shift_max > 0 ? "data.augment.shift_max"
                       : a.mask_prob > 0  ? "data.augment.mask_prob" : nullptr;
      if (on)
        fail("{}: config key '{}' turns on series augmentation, which would alter token ids; data.source text "
             "needs every data.augment value at 0", origin(on), on);
    }
    if (std::optional<ConfigProblem> p = check_model_config(c)) fail("{}: {}", origin(p->key), p->message);
    check_device(c, origin("runtime.device"));
    if (c.runtime.backend == "reference" && c.runtime.precision != "fp32")
      fail("{}: config key 'runtime.precision' is {} but runtime.backend is reference, which computes in fp32 only "
           "(it has no bf16/fp16 GEMM): set runtime.precision: fp32, or runtime.backend: cpu",
           origin("runtime.precision"), c.runtime.precision);
    // npy jobs validate when data.npy.val_x is set; csv/synthetic when the val fraction is > 0.
    const bool has_val = npy ? !d.npy.val_x.empty() : d.split[1] > 0;
    if (t.early_stopping.patience > 0 && !has_val)
      fail("{}: config key 'train.early_stopping.patience' is {} but the validation split (data.split[1]) "
           "is 0; give validation a fraction or set patience to 0",
           origin("train.early_stopping.patience"), t.early_stopping.patience);
    if (t.schedule.name == "plateau" && !has_val)
      fail("{}: config key 'train.schedule.name' is 'plateau', which watches the validation loss, but "
           "the validation split (data.split[1]) is 0; give validation a fraction or pick another schedule",
           origin("train.schedule.name"));
    check_forecasting(c, has_val);
    const auto& m = c.model;
    if (m.init_from.empty() && (!m.init_from_map.empty() || !m.init_from_skip.empty())) {
      const char* key = m.init_from_map.empty() ? "model.init_from_skip" : "model.init_from_map";
      fail("{}: config key '{}' is set but model.init_from is empty; it only applies when a model starts from "
           "another run's weights: set model.init_from or remove it", origin(key), key);
    }
    if (!m.encoder_from.empty() && !m.init_from.empty())
      fail("{}: config keys 'model.encoder_from' and 'model.init_from' are both set; a model starts from one source: "
           "keep model.encoder_from for a pretrained encoder under a fresh head, or model.init_from (with its map and "
           "skip list) for anything else", origin("model.encoder_from"));
    if (t.optimizer.name == "sgd" && t.optimizer.nesterov && t.optimizer.momentum <= 0)
      fail("{}: config key 'train.optimizer.nesterov' is true but train.optimizer.momentum is 0; Nesterov "
           "needs momentum > 0 (e.g. 0.9)",
           origin("train.optimizer.nesterov"));
    // Refused on any rank count, so a config that runs on one process runs on N.
    if (t.zero != 0 && t.optimizer.name != "adamw")
      fail("{}: config key 'train.zero' is {} but train.optimizer.name is '{}'; ZeRO stage 1 shards AdamW's "
           "moments and {} keeps nothing worth sharding: set train.zero: 0, or train.optimizer.name: adamw",
           origin("train.zero"), t.zero, t.optimizer.name, t.optimizer.name);
  }

  Config config;

 private:
  // The forecasting keys: each needs the task and data it speaks of.
  void check_forecasting(const Config& c, bool has_val) const {
    check_time_inputs(c.data);
    check_fleet(c.data);
    check_residual(c);
    check_monitor(c, has_val);
  }

  // data.time_column, data.calendar, data.future_features, data.seasons.
  void check_time_inputs(const DataConfig& d) const {
    const bool windowed = is_series(d);
    if (!d.time_column.empty()) {
      if (data_source(d).path_holds != "CSV")
        fail("{}: config key 'data.time_column' names a column of a CSV file, but data.source is {}: set data.source: "
             "csv or remove data.time_column", origin("data.time_column"), d.source);
      for (const auto* list : {&d.features, &d.targets})
        if (std::find(list->begin(), list->end(), d.time_column) != list->end())
          fail("{}: config key 'data.time_column' is '{}', which is also in data.{}: the time column is no input "
               "or target; use data.seasons / data.calendar for what time says", origin("data.time_column"),
               d.time_column, list == &d.features ? "features" : "targets");
    }
    for (const std::string& part : d.calendar) {
      if (std::find(calendar_parts().begin(), calendar_parts().end(), part) == calendar_parts().end())
        fail("{}: config key 'data.calendar' has '{}'{}, which is no calendar part; use {}", origin("data.calendar"),
             part, did_you_mean(part, calendar_parts()), quoted_list(calendar_parts()));
      if (d.time_column.empty())
        fail("{}: config key 'data.calendar' derives inputs from each row's time, but data.time_column is empty: "
             "name the CSV's time column in data.time_column", origin("data.calendar"));
    }
    for (const std::string& f : d.future_features) {
      if (!windowed)
        fail("{}: config key 'data.future_features' names columns of a series (csv or synthetic), but data.source is "
             "{}: remove data.future_features", origin("data.future_features"), d.source);
      if (std::find(d.targets.begin(), d.targets.end(), f) != d.targets.end())
        fail("{}: config key 'data.future_features' names '{}', a target: a target's future is what the model "
             "forecasts and never one of its inputs; remove it from data.future_features",
             origin("data.future_features"), f);
    }
    if (!d.future_features.empty()) {
      const auto& a = d.augment;
      if (a.jitter_sigma > 0 || a.scale_sigma > 0 || a.warp_sigma > 0 || a.shift_max > 0 || a.mask_prob > 0)
        fail("{}: config key 'data.future_features' is set, and data.augment would alter the known future like the "
             "past (time warps and shifts move it across the forecast's start): set every data.augment value to 0 "
             "or remove data.future_features", origin("data.future_features"));
    }
    if (!d.seasons.empty() && !windowed)
      fail("{}: config key 'data.seasons' adds phase inputs to the rows of a series; data.source {} has no rows in "
           "time order (csv or synthetic do): remove data.seasons", origin("data.seasons"), d.source);
  }

  // The fleet keys (data/fleet.h): series of a csv or synthetic source; the id column is no input.
  void check_fleet(const DataConfig& d) const {
    const bool windowed = is_series(d);
    if (!d.series_id.empty()) {
      if (data_source(d).path_holds != "CSV")
        fail("{}: config key 'data.series_id' names the series column of a long-format CSV, but data.source is {}: set "
             "data.source: csv (data.synthetic.cells makes a synthetic fleet) or remove data.series_id",
             origin("data.series_id"), d.source);
      for (const auto* list : {&d.features, &d.targets, &d.static_features})
        if (std::find(list->begin(), list->end(), d.series_id) != list->end())
          fail("{}: config key 'data.series_id' is '{}', which is also in data.{}: the id column names each row's "
               "series and is no number; remove it from that list", origin("data.series_id"), d.series_id,
               list == &d.features ? "features" : list == &d.targets ? "targets" : "static_features");
      if (d.series_id == d.time_column)
        fail("{}: config keys 'data.series_id' and 'data.time_column' both name '{}'; one column cannot be both",
             origin("data.series_id"), d.series_id);
    }
    for (const auto& [key, set] : {std::pair<const char*, bool>{"data.normalize_scope", d.normalize_scope != "global"},
                                   {"data.static_features", !d.static_features.empty()},
                                   {"data.end", !d.end.empty()}})
      if (set && !windowed)
        fail("{}: config key '{}' applies to the series of a csv or synthetic source, but data.source is {}: remove "
             "it", origin(key), key, d.source);
    for (const std::string& f : d.static_features)
      if (std::find(d.targets.begin(), d.targets.end(), f) != d.targets.end() || f == d.time_column)
        fail("{}: config key 'data.static_features' names '{}', the {}; a static feature is an input constant within "
             "each series: remove it from data.static_features", origin("data.static_features"), f,
             f == d.time_column ? "time column" : "target");
    if (!d.end.empty() && !parse_int64(d.end) && d.time_column.empty())
      fail("{}: config key 'data.end' is the time '{}', but data.time_column is empty, so rows have no time: name the "
           "time column, or give a row count (N: each series' first N rows; -N: all but its last N)",
           origin("data.end"), d.end);
  }

  // model.residual_to: the window must hold each target's past, and a whole season of it.
  void check_residual(const Config& c) const {
    const auto& d = c.data;
    const bool windowed = is_series(d);
    const std::string& r = c.model.residual_to;
    if (r != "none") {
      if (!windowed || (c.model.type != "lstm" && c.model.type != "gru" && c.model.type != "mlp" &&
                        c.model.type != "transformer" && c.model.type != "cnn"))
        fail("{}: config key 'model.residual_to' is {}, a forecast baseline over the window's own targets: it needs "
             "data.source csv or synthetic and model.type lstm, gru, mlp, transformer or cnn (got {} and {}); set model.residual_to: "
             "none", origin("model.residual_to"), r, d.source, c.model.type);
      for (const auto& t : d.targets)
        if (!d.features.empty() && std::find(d.features.begin(), d.features.end(), t) == d.features.end())
          fail("{}: config key 'model.residual_to' is {}, which repeats each target's last observed values, but "
               "target '{}' is not among data.features, so the window does not hold it: add it to data.features or "
               "set model.residual_to: none", origin("model.residual_to"), r, t);
    }
    if (r == "seasonal_naive") {
      if (d.seasons.empty())
        fail("{}: config key 'model.residual_to' is seasonal_naive, which repeats the last period of "
             "data.seasons' longest season, but data.seasons is empty: set data.seasons (e.g. [24]) or use "
             "residual_to: last_value", origin("model.residual_to"));
      const int64_t m = *std::max_element(d.seasons.begin(), d.seasons.end());
      if (m > d.lookback)
        fail("{}: config key 'data.seasons' has a season of {} rows, longer than data.lookback ({}), so the window "
             "holds no whole period for model.residual_to: seasonal_naive to repeat: raise data.lookback to at "
             "least {} or use residual_to: last_value", origin("data.seasons"), m, d.lookback, m);
    }
  }

  // train.monitor: a metric the run's task reports, on a validation split it has.
  void check_monitor(const Config& c, bool has_val) const {
    const auto& d = c.data;
    const bool windowed = is_series(d);
    const bool text = is_text(d);
    const std::string& mon = c.train.monitor;
    if (mon == "val_loss") return;
    if (!has_val)
      fail("{}: config key 'train.monitor' is {}, a validation metric, but the run has no validation split; give "
           "validation a fraction of data.split (npy: data.npy.val_x) or monitor val_loss", origin("train.monitor"),
           mon);
    const bool classifier = is_arrays(d) && c.train.loss == "cross_entropy";
    const bool forecaster = windowed || (is_arrays(d) && !classifier);
    if (mon == "val_accuracy" ? !classifier && !text : !forecaster)
      fail("{}: config key 'train.monitor' is {}, which a {} run does not report; it reports {}: pick one of them",
           origin("train.monitor"), mon, text ? "language model" : classifier ? "classifier" : "forecasting",
           text || classifier ? "val_loss, val_accuracy" : "val_loss, val_mae, val_rmse, val_mape, val_smape, val_mase");
    if (mon == "val_mase" && !windowed)
      fail("{}: config key 'train.monitor' is val_mase, which needs a series to scale by (csv or synthetic data); "
           "an npy run reports val_mae, val_rmse, val_mape and val_smape", origin("train.monitor"));
  }

  // data.sampling random draws windows of a token stream: text only; its epoch length key
  // means nothing to the fixed windows, so setting it without random sampling is refused.
  void check_sampling(const DataConfig& d) const {
    if (d.sampling == "random" && !is_text(d))
      fail("{}: config key 'data.sampling' is random, which draws data.block_size tokens at random offsets of a "
           "text and needs data.source: text (got {}); use data.sampling: windows for {} data",
           origin("data.sampling"), d.source, d.source);
    if (d.samples_per_epoch > 0 && d.sampling != "random")
      fail("{}: config key 'data.samples_per_epoch' is {} but data.sampling is {}, whose epoch is every window "
           "once; set data.sampling: random, or data.samples_per_epoch: 0", origin("data.samples_per_epoch"),
           d.samples_per_epoch, d.sampling);
  }

  // train.task against the data source; what needs the data itself (labels or float y) is
  // checked when the data is read (train/objective.h's resolve_task).
  void check_task(const Config& c) const {
    const std::string& t = c.train.task;
    const SourceKind kind = data_source(c.data).kind;
    const char* fix = nullptr;
    if (t == "next_token" && kind != SourceKind::text)
      fix = "next_token predicts the next token of a text: set data.source text";
    if ((t == "classify" || t == "regress") && kind != SourceKind::arrays)
      fix = "classify and regress read one target per sample from npy arrays: set data.source npy with data.npy.train_y";
    if (t == "forecast" && kind == SourceKind::text)
      fix = "data.source text trains next-token prediction: set train.task: next_token or auto";
    if (t == "masked_pretrain" && kind != SourceKind::arrays)
      fix = "masked pretraining reconstructs samples given whole: set data.source npy with data.npy.train_x (X [N, T, "
            "F]; no y needed)";
    if (fix) fail("{}: config key 'train.task' is {} but data.source is {}; {}", origin("train.task"), t, c.data.source, fix);
    // span masking: an unmasked run of mean lm (1 - r) / r must last at least a step.
    const MaskingConfig& m = c.train.masking;
    if (t == "masked_pretrain" && m.strategy == "span" && m.mask_ratio > m.mean_span / (1 + m.mean_span))
      fail("{}: config key 'train.masking.mask_ratio' is {} but span masking with train.masking.mean_span {} masks "
           "at most {:.4g} of the steps (unmasked runs of mean mean_span * (1 - ratio) / ratio must last a step); "
           "lower the ratio or raise mean_span", origin("train.masking.mask_ratio"), m.mask_ratio, m.mean_span,
           m.mean_span / (1 + m.mean_span));
  }

  // data.source npy: the train arrays are required, a split's y goes with its X, and only
  // normalizations that work per feature over [N, T, F] apply.
  void check_npy(const Config& c) const {
    const NpyConfig& n = c.data.npy;
    const bool masked = c.train.task == "masked_pretrain";  // X alone: y is not needed (nor read)
    if (n.train_x.empty() || (n.train_y.empty() && !masked)) {
      const char* key = n.train_x.empty() ? "data.npy.train_x" : "data.npy.train_y";
      fail("{}: config key '{}' is empty but data.source is 'npy'; set it to the .npy file (or glob, e.g. "
           "data/train_*_{}.npy) of the training {}", origin(key), key, n.train_x.empty() ? "X" : "y",
           n.train_x.empty() ? "inputs [N, T, F]" : "targets ([N] labels or [N, H, targets])");
    }
    const std::pair<const char*, const std::string*> pairs[2][2] = {
        {{"data.npy.val_x", &n.val_x}, {"data.npy.val_y", &n.val_y}},
        {{"data.npy.test_x", &n.test_x}, {"data.npy.test_y", &n.test_y}}};
    for (const auto& p : pairs)
      if (!masked && p[0].second->empty() != p[1].second->empty()) {
        const auto& set = p[0].second->empty() ? p[1] : p[0];
        const auto& unset = p[0].second->empty() ? p[0] : p[1];
        fail("{}: config key '{}' is set but '{}' is empty; a split needs both X and y (or neither)",
             origin(set.first), set.first, unset.first);
      }
    // Lengths: one way (files or a padding value), and files for every split once the train
    // split has them (a model trained on lengths scores samples with theirs).
    const std::pair<const char*, const std::string*> lens[3] = {
        {"data.npy.train_len", &n.train_len}, {"data.npy.val_len", &n.val_len}, {"data.npy.test_len", &n.test_len}};
    const std::string* xs[3] = {&n.train_x, &n.val_x, &n.test_x};
    for (int i = 0; i < 3; ++i) {
      const auto& [key, value] = lens[i];
      if (!value->empty() && n.pad_value != "none")
        fail("{}: config key '{}' is set and so is data.npy.pad_value; give the lengths one way: lengths files, or "
             "pad_value none", origin(key), key);
      if (!value->empty() && xs[i]->empty())
        fail("{}: config key '{}' is set but its split has no X; set data.npy.{}_x or drop it", origin(key), key,
             i == 1 ? "val" : "test");
      if (i > 0 && !xs[i]->empty() && value->empty() != n.train_len.empty())
        fail("{}: config key '{}' is {} but data.npy.train_len is {}; every split needs its lengths files once the "
             "train split has them (or none do)", origin(value->empty() ? "data.npy.train_len" : key), key,
             value->empty() ? "empty" : "set", n.train_len.empty() ? "empty" : "set");
    }
    if (c.data.normalize == "minmax")
      fail("{}: config key 'data.normalize' is minmax, which data.source npy does not support; use zscore (fitted "
           "per feature on the training X) or none", origin("data.normalize"));
  }

  void walk(const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node k = it->first;  // copies: it-> yields a temporary proxy
      const YAML::Node v = it->second;
      std::string where = mark_str(name_, k.Mark());
      if (!k.IsScalar()) fail("{}: config keys must be plain words, got {}", where, describe_node(k));
      std::string key = prefix.empty() ? k.Scalar() : prefix + "." + k.Scalar();
      if (!seen.insert(k.Scalar()).second)
        fail("{}: config key '{}' appears twice; keep one", where, key);
      if (leaves_.count(key)) {
        // Point at the value when it has a position, since the value is what is wrong.
        YAML::Mark m = v.Mark().is_null() ? k.Mark() : v.Mark();
        assign(key, v, mark_str(name_, m), base_dir_, name_);
      } else if (sections_.count(key)) {
        if (v.IsNull()) continue;  // "train:" with nothing under it
        if (!v.IsMap())
          fail("{}: '{}' is a section and expects a mapping of its keys ({}), got {}", where, key,
               quoted_list(children_of(key)), describe_node(v));
        walk(v, key);
      } else {
        unknown_key(where, key);
      }
    }
  }

  void assign(const std::string& key, const YAML::Node& node, const std::string& where, const fs::path& base,
              const std::string& file) {
    Assign a(key, node, where, base, file);
    visit_fields(config, a);
    if (!a.found()) unknown_key(where, key);
    origins_[key] = where;
  }

  std::string origin(const std::string& key) const {
    auto it = origins_.find(key);
    return it == origins_.end() ? name_ + " (default value)" : it->second;
  }

  static std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  }

  std::string name_;
  fs::path base_dir_;
  std::set<std::string> leaves_;
  std::set<std::string> sections_;
  std::map<std::string, std::string> origins_;
};

}  // namespace

std::vector<std::string> config_keys() { return all_keys(); }

std::vector<std::string> config_path_keys() {
  CollectKeys c;
  const Config cfg;
  visit_fields(cfg, c);
  return c.paths;
}

Config load_config_text(const std::string& text, const std::string& name, const std::string& base_dir,
                        const std::vector<std::string>& overrides) {
  Loader loader(name, base_dir.empty() ? fs::current_path() : fs::path(base_dir));
  loader.load_text(text);
  for (const auto& o : overrides) loader.apply_override(o);
  loader.check(loader.config);
  return loader.config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return load_config_text("", "<defaults>", "", overrides);
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("{}: is a directory, not a config file; pass the YAML file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the config file ({}); check the path", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  fs::path dir = fs::absolute(fs::path(path)).parent_path();
  return load_config_text(text.str(), path, dir.string(), overrides);
}

}  // namespace seqtrain
