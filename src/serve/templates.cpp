// Templates: see templates.h.
#include "serve/templates.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config.h"
#include "core/error.h"
#include "data/synthetic_sets.h"
#include "io/atomic_dir.h"
#include "serve/assets.h"
#include "serve/paths.h"

namespace seqtrain::serve {
namespace fs = std::filesystem;
namespace {

std::string trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t");
  const size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

std::string unquote(std::string s) {
  s = trim(std::move(s));
  if (s.size() >= 2 && s.front() == '`' && s.back() == '`') s = s.substr(1, s.size() - 2);
  return s;
}

// The cells of a Markdown table row, split on '|' but not on an escaped '\|'.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cur += '|';
      ++i;
    } else if (line[i] == '|') {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return out;
}

// Walks a YAML node into dotted leaf keys; sequences and mappings below a known key are one
// value, written as flow YAML (as an override takes it).
void flatten(const YAML::Node& n, const std::string& prefix, const std::set<std::string>& keys,
             std::map<std::string, std::string>& out) {
  if (!prefix.empty() && keys.count(prefix)) {
    if (n.IsScalar()) {
      out[prefix] = n.Scalar();
    } else {
      YAML::Emitter e;
      e << YAML::Flow << n;
      out[prefix] = e.c_str();
    }
    return;
  }
  if (!n.IsMap()) return;
  for (const auto& kv : n) flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), keys, out);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  ST_CHECK(in.good(), "{}: cannot be read", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The leading '#' lines of a template: what it is for, in its author's words.
std::string description_of(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line) && !line.empty() && line[0] == '#') out += trim(line.substr(1)) + " ";
  return trim(out);
}

const char* kLstmForecaster = R"(# The battery service's optimized LSTM forecaster: the next 16 voltages of a cell from the
# last 150 steps (LOOKBACK 150) of voltage, current, temperature and state of charge, batches
# of 256, loader workers sized to the machine, on the built-in synthetic battery series.
seed: 0
data:
  source: synthetic
  synthetic:
    rows: 12000
  features: [voltage, current, temperature, soc]
  targets: [voltage]
  lookback: 150
  horizon: 16
  split: [0.8, 0.1, 0.1]
  workers: auto
model:
  type: lstm
  hidden: 64
  layers: 2
train:
  epochs: 10
  batch_size: 256
  loss: mse
  grad_clip: 1.0
  log_every: 5
  optimizer:
    name: adamw
    lr: 0.002
  schedule:
    name: cosine
    warmup_steps: 20
  early_stopping:
    patience: 3
)";

const char* kFnnBaseline = R"(# The FNN baseline of the battery service: a feed-forward network over the flattened last 150
# steps, the bar the LSTM must clear, on the same synthetic battery series.
seed: 0
data:
  source: synthetic
  synthetic:
    rows: 12000
  features: [voltage, current, temperature, soc]
  targets: [voltage]
  lookback: 150
  horizon: 16
  split: [0.8, 0.1, 0.1]
model:
  type: mlp
  hidden: 128
  layers: 2
train:
  epochs: 10
  batch_size: 256
  loss: mse
  log_every: 5
  optimizer:
    name: adamw
    lr: 0.001
  early_stopping:
    patience: 3
)";

const char* kCharGpt = R"(# A small character GPT on seqtrain's own config reference (data/seqtrain_docs.txt, written
# beside the templates): 2 blocks, 4 heads, 64 characters of context.
seed: 0
data:
  source: text
  path: ../data/seqtrain_docs.txt
  vocab: char
  block_size: 64
  split: [0.9, 0.1, 0.0]
  sampling: random
  samples_per_epoch: 1200
  stride: 64
model:
  type: gpt
  layers: 2
  heads: 4
  hidden: 64
  dropout: 0.0
train:
  epochs: 4
  batch_size: 12
  loss: cross_entropy
  grad_clip: 1.0
  log_every: 20
  optimizer:
    name: adamw
    lr: 0.001
    weight_decay: 0.1
  schedule:
    name: cosine
    warmup_steps: 20
)";

const char* kSetEncoder = R"(# A set encoder: sets of 20-300 feature vectors, labelled by which marker taxa they hold (4
# classes), read by a transformer without positions and mean-pooled (data/sets, written beside
# the templates by the same generator as `seqtrain data sets`).
seed: 0
data:
  source: npy
  normalize: zscore
  npy:
    train_x: ../data/sets/train_x.npy
    train_y: ../data/sets/train_y.npy
    train_len: ../data/sets/train_len.npy
    val_x: ../data/sets/val_x.npy
    val_y: ../data/sets/val_y.npy
    val_len: ../data/sets/val_len.npy
    test_x: ../data/sets/test_x.npy
    test_y: ../data/sets/test_y.npy
    test_len: ../data/sets/test_len.npy
model:
  type: transformer
  hidden: 64
  layers: 2
  heads: 4
  positions: none
  pooling: mean
train:
  task: classify
  loss: cross_entropy
  epochs: 4
  batch_size: 16
  eval_every: 1e
  monitor: val_accuracy
  optimizer:
    name: adamw
    lr: 0.001
)";

}  // namespace

const std::map<std::string, KeyDoc>& key_docs() {
  static const std::map<std::string, KeyDoc> docs = [] {
    std::map<std::string, KeyDoc> out;
    std::istringstream in{std::string(asset("CONFIG.md"))};
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("| `", 0) != 0) continue;
      const std::vector<std::string> c = cells(line);
      if (c.size() < 4) continue;
      std::istringstream names(c[0]);  // a row may document several keys: `a`, `b`
      for (std::string name; std::getline(names, name, ',');) out[unquote(name)] = KeyDoc{c[1], unquote(c[2]), c[3]};
    }
    return out;
  }();
  return docs;
}

TemplateInfo describe_template(const fs::path& dir, const std::string& name) {
  TemplateInfo info;
  info.name = name;
  const fs::path file = dir / name;
  try {
    const std::string text = read_text(file);
    info.description = description_of(text);
    const Config config = load_config(file.string());
    const std::vector<std::string> key_list = config_keys();
    const std::set<std::string> keys(key_list.begin(), key_list.end());
    const std::vector<std::string> path_list = config_path_keys();
    const std::set<std::string> paths(path_list.begin(), path_list.end());
    std::map<std::string, std::string> resolved, own;
    flatten(YAML::Load(to_yaml(config)), "", keys, resolved);
    flatten(YAML::Load(text), "", keys, own);
    // The schema's defaults are the same for every template: flattened once.
    static const std::map<std::string, std::string> defaults = [&] {
      std::map<std::string, std::string> d;
      flatten(YAML::Load(to_yaml(Config{})), "", keys, d);
      return d;
    }();
    const auto& docs = key_docs();
    for (const std::string& k : key_list) {
      TemplateField f;
      f.key = k;
      f.value = resolved[k];
      if (auto d = defaults.find(k); d != defaults.end()) f.default_value = d->second;
      if (auto d = docs.find(k); d != docs.end()) {
        f.type = d->second.type;
        f.doc = d->second.doc;
      }
      f.in_template = own.count(k) > 0;
      f.path = paths.count(k) > 0;
      info.fields.push_back(std::move(f));
    }
  } catch (const Error& e) {
    info.error = e.what();
    info.fields.clear();
  } catch (const YAML::Exception& e) {
    info.error = fmt::format("{}: {}", file.string(), e.what());
    info.fields.clear();
  }
  return info;
}

std::vector<TemplateInfo> list_templates(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (valid_template_name(n) && e.is_regular_file(ec) && lies_inside(fs::canonical(dir, ec), e.path())) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<TemplateInfo> out;
  for (const std::string& n : names) out.push_back(describe_template(dir, n));
  return out;
}

std::vector<std::string> override_args(const nlohmann::json& overrides, const fs::path& root) {
  ST_CHECK(overrides.is_object(), "'overrides' must be an object of key: value (value as YAML text), got {}",
           overrides.type_name());
  const std::vector<std::string> path_list = config_path_keys();
  const std::set<std::string> paths(path_list.begin(), path_list.end());
  std::vector<std::string> out;
  for (const auto& [key, v] : overrides.items()) {
    std::string value;
    if (v.is_string()) value = v.get<std::string>();
    else if (v.is_number() || v.is_boolean()) value = v.dump();
    else fail("override '{}': the value must be text, a number or true/false (write lists as YAML text: [a, b])", key);
    ST_CHECK(value.find('\n') == std::string::npos, "override '{}': the value must be one line", key);
    if (paths.count(key) && !trim(value).empty()) {
      fs::path p = trim(value);
      if (p.is_relative()) p = root / p;
      ST_CHECK(lies_inside(root, p), "override '{}': '{}' lies outside the server's root {}; give a path inside it",
               key, value, root.string());
      value = fs::weakly_canonical(p).string();
    }
    out.push_back(key + "=" + value);
  }
  return out;
}

std::vector<std::string> install_default_templates(const fs::path& root) {
  std::vector<std::string> done;
  const fs::path dir = root / "templates";
  if (fs::exists(dir)) return done;
  const fs::path data = root / "data";
  fs::create_directories(data);
  if (!fs::exists(data / "seqtrain_docs.txt")) {
    write_file_atomic((data / "seqtrain_docs.txt").string(), std::string(asset("CONFIG.md")));
    done.push_back("data/seqtrain_docs.txt (the char GPT's text)");
  }
  if (!fs::exists(data / "sets")) {
    write_set_task((data / "sets").string(), 500, 0);
    done.push_back("data/sets/ (the set encoder's npy files)");
  }
  const std::string tmp = (root / ".templates.tmp").string();
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::pair<const char*, const char*> files[] = {{"lstm_forecaster.yaml", kLstmForecaster},
                                                       {"fnn_baseline.yaml", kFnnBaseline},
                                                       {"char_gpt.yaml", kCharGpt},
                                                       {"set_encoder.yaml", kSetEncoder}};
  for (const auto& [name, text] : files) write_file_atomic((fs::path(tmp) / name).string(), text);
  publish_dir(tmp, dir.string());
  done.push_back("templates/ (lstm_forecaster, fnn_baseline, char_gpt, set_encoder)");
  return done;
}

}  // namespace seqtrain::serve
