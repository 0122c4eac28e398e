// A run directory as the report reads it: see run_history.h.
#include "obs/run_history.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace seqtrain {
namespace fs = std::filesystem;

namespace {

const char* kRunHint = "give the --out directory of a `seqtrain train` run (it holds config.yaml and metrics.jsonl)";

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  ST_CHECK(f, "cannot read '{}'; check its permissions", path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> read_records(const fs::path& path) {
  const std::string text = read_text(path);
  std::vector<nlohmann::json> out;
  size_t begin = 0;
  for (int64_t line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    const bool last = end == std::string::npos;
    if (last) end = text.size();
    const std::string_view s(text.data() + begin, end - begin);
    begin = end + 1;
    if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      out.push_back(std::move(j));
      continue;
    }
    // A run being written (or killed mid-write) may end in a torn line: what it had is still
    // worth a report. Anywhere else a bad line means the file was edited or damaged.
    if (last) break;
    fail("{}:{}: not a JSON object (metrics.jsonl holds one record a line); the file was edited or damaged: "
         "restore it, or delete that line to report the rest",
         path.string(), line);
  }
  return out;
}

std::string flow(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return n.Scalar();
    case YAML::NodeType::Sequence: {
      std::string s = "[";
      for (size_t i = 0; i < n.size(); ++i) s += (i ? ", " : "") + flow(n[i]);
      return s + "]";
    }
    case YAML::NodeType::Map: {
      std::string s = "{";
      bool first = true;
      for (const auto& kv : n) {
        s += (first ? "" : ", ") + kv.first.Scalar() + ": " + flow(kv.second);
        first = false;
      }
      return s + "}";
    }
    default: return "null";
  }
}

void flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (n.IsMap() && (n.size() > 0 || prefix.empty())) {
    for (const auto& kv : n) flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
    return;
  }
  out[prefix] = flow(n);
}

}  // namespace

std::map<std::string, std::string> flatten_yaml(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}:{}:{}: not readable YAML ({}); restore the run's config.yaml (seqtrain writes it at the run's start)",
         origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  std::map<std::string, std::string> out;
  if (root.IsNull()) return out;
  ST_CHECK(root.IsMap(), "{}: a config is a map of sections (data:, model:, train:, runtime:), not {}; restore the run's "
           "config.yaml", origin, root.IsSequence() ? "a list" : "a single value");
  flatten(root, "", out);
  return out;
}

RunHistory read_run_history(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  ST_CHECK(fs::exists(d, ec), "report: run directory '{}' does not exist; {}", dir, kRunHint);
  ST_CHECK(fs::is_directory(d, ec), "report: '{}' is a file, not a run directory; {}", dir, kRunHint);
  for (const char* f : {"metrics.jsonl", "config.yaml"})
    ST_CHECK(fs::is_regular_file(d / f, ec), "report: '{}' is not a run directory: it has no {}; {}", dir, f, kRunHint);
  RunHistory r;
  r.dir = dir;
  r.records = read_records(d / "metrics.jsonl");
  r.config = flatten_yaml(read_text(d / "config.yaml"), (d / "config.yaml").string());
  if (fs::is_regular_file(d / "summary.json", ec)) {
    const std::string text = read_text(d / "summary.json");
    r.summary = nlohmann::ordered_json::parse(text, nullptr, false);
    ST_CHECK(r.summary.is_object(), "{}: not a JSON object; the file was edited or damaged: restore it, or delete it to "
             "report the run without its final metrics", (d / "summary.json").string());
  }
  return r;
}

void name_runs(std::vector<RunHistory>& runs) {
  std::map<std::string, int> uses;
  auto base = [](const std::string& dir) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "runs/a/"
    const std::string name = p.filename().string();
    return name.empty() || name == "." ? fs::absolute(p).lexically_normal().filename().string() : name;
  };
  for (const RunHistory& r : runs) ++uses[base(r.dir)];
  std::set<std::string> taken;
  for (RunHistory& r : runs) {
    const std::string label = uses[base(r.dir)] > 1 ? fs::path(r.dir).lexically_normal().string() : base(r.dir);
    std::string name = label;
    // The same directory given twice: still one label each.
    for (int k = 2; taken.count(name); ++k) name = label + " #" + std::to_string(k);
    taken.insert(name);
    r.name = name;
  }
}

std::vector<PlotPoint> curve(const RunHistory& run, std::string_view split, std::string_view y, std::string_view x) {
  std::vector<PlotPoint> out;
  const std::string ys(y), xs(x);
  for (const nlohmann::json& r : run.records) {
    const auto s = r.find("split");
    if (s == r.end() || !s->is_string() || s->get_ref<const std::string&>() != split) continue;
    const auto a = r.find(xs), b = r.find(ys);
    if (a == r.end() || b == r.end() || !a->is_number() || !b->is_number()) continue;
    out.push_back({a->get<double>(), b->get<double>()});
  }
  return out;
}

std::vector<ConfigDifference> config_differences(const std::vector<std::map<std::string, std::string>>& configs) {
  std::vector<ConfigDifference> out;
  if (configs.size() < 2) return out;
  std::set<std::string> keys;
  for (const auto& c : configs)
    for (const auto& [k, v] : c) keys.insert(k);
  for (const std::string& k : keys) {
    ConfigDifference d{k, {}};
    for (const auto& c : configs) {
      const auto it = c.find(k);
      d.values.push_back(it == c.end() ? std::nullopt : std::optional<std::string>(it->second));
    }
    bool differ = false;
    for (const auto& v : d.values) differ |= v != d.values.front();
    if (differ) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace seqtrain
