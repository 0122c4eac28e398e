// to_yaml and config_hash: the canonical text form of a Config.
// Written by hand rather than with YAML::Emitter so the output is byte-stable across
// yaml-cpp versions (config_hash depends on it): numbers use fmt's shortest round-trip form,
// strings are always double-quoted with JSON-style escapes (valid YAML), lists are flow style.
#include <string>

#include "config/config.h"
#include "config/fields.h"
#include "core/error.h"
#include "core/fnv1a.h"

namespace seqtrain {
namespace {

using namespace config_detail;

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", ch);
        else out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

class Emit {
 public:
  std::string out = "# seqtrain resolved config: every key; loading this file gives the same config\n";

  void field(const char* key, const int64_t& x, Range) { line(key, fmt::format("{}", x)); }
  void field(const char* key, const uint64_t& x) { line(key, fmt::format("{}", x)); }
  void field(const char* key, const double& x, Range) { line(key, fmt::format("{}", x)); }
  void field(const char* key, const bool& x) { line(key, x ? "true" : "false"); }
  void field(const char* key, const std::string& x, Choices) { line(key, x); }  // choices are plain words
  void field(const char* key, const std::string& x, PathTag) { line(key, quote(x)); }
  void field(const char* key, const std::string& x, ColumnTag) { line(key, quote(x)); }
  void field(const char* key, const std::string& x, CountOrAuto) { line(key, x); }
  void field(const char* key, const int64_t& x, CountAtLeastOneOrAuto) {
    line(key, x == kAutoBatch ? std::string("auto") : fmt::format("{}", x));
  }
  void field(const char* key, const std::string& x, BytesOrAuto) { line(key, x); }
  void field(const char* key, const std::string& x, FrequencyTag) { line(key, x); }
  void field(const char* key, const std::string& x, NumberOrNone) { line(key, x); }
  void field(const char* key, const std::string& x, EndTag) { line(key, quote(x)); }
  void field(const char* key, const std::vector<std::string>& x) {
    std::string v = "[";
    for (size_t i = 0; i < x.size(); ++i) v += (i ? ", " : "") + quote(x[i]);
    line(key, v + "]");
  }
  void field(const char* key, const std::vector<int64_t>& x, Range) {
    std::string v = "[";
    for (size_t i = 0; i < x.size(); ++i) v += (i ? ", " : "") + std::to_string(x[i]);
    line(key, v + "]");
  }
  void field(const char* key, const std::vector<int64_t>& x, SizeList) { field(key, x, Range{}); }
  void field(const char* key, const std::vector<double>& x, Range) {
    std::string v = "[";
    for (size_t i = 0; i < x.size(); ++i) v += (i ? ", " : "") + fmt::format("{}", x[i]);
    line(key, v + "]");
  }
  void field(const char* key, const std::vector<std::string>& x, PrefixMap) { field(key, x); }
  void field(const char* key, const std::vector<std::string>& x, NameList) { field(key, x); }
  // Flow style, weight_decay only when set: [{prefix: "rnn.", lr_scale: 0.1, frozen: false}].
  void field(const char* key, const std::vector<ParamGroup>& x) {
    std::string v = "[";
    for (size_t i = 0; i < x.size(); ++i) {
      const ParamGroup& g = x[i];
      v += fmt::format("{}{{prefix: {}, lr_scale: {}", i ? ", " : "", quote(g.prefix), g.lr_scale);
      if (g.weight_decay) v += fmt::format(", weight_decay: {}", *g.weight_decay);
      v += fmt::format(", frozen: {}}}", g.frozen ? "true" : "false");
    }
    line(key, v + "]");
  }
  void field(const char* key, const std::array<double, 3>& x) {
    line(key, fmt::format("[{}, {}, {}]", x[0], x[1], x[2]));
  }

 private:
  // Opens the sections between the previous key's section and this one's, then writes
  // "name: value" indented two spaces per level.
  void line(const std::string& key, const std::string& value) {
    std::vector<std::string> parts;
    for (size_t b = 0;;) {
      size_t e = key.find('.', b);
      parts.push_back(key.substr(b, e == std::string::npos ? e : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    size_t depth = parts.size() - 1;
    size_t common = 0;
    while (common < depth && common < open_.size() && open_[common] == parts[common]) ++common;
    open_.resize(common);
    for (size_t i = common; i < depth; ++i) {
      out += std::string(2 * i, ' ') + parts[i] + ":\n";
      open_.push_back(parts[i]);
    }
    out += std::string(2 * depth, ' ') + parts.back() + ": " + value + "\n";
  }

  std::vector<std::string> open_;
};

}  // namespace

std::string to_yaml(const Config& config) {
  Emit e;
  visit_fields(config, e);
  return e.out;
}

std::string config_hash(const Config& config) {
  return fmt::format("{:016x}", fnv1a(to_yaml(config)));
}

}  // namespace seqtrain
