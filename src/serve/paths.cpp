#include "serve/paths.h"

#include <cctype>
#include <system_error>

namespace seqtrain::serve {
namespace fs = std::filesystem;

bool lies_inside(const fs::path& base, const fs::path& p) {
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(p, ec);
  if (ec) return false;
  auto b = base.begin(), r = real.begin();
  for (; b != base.end(); ++b, ++r)
    if (r == real.end() || *r != *b) return false;
  return true;
}

fs::path resolve_inside(const fs::path& base, std::string_view rel, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why) *why = reason;
    return fs::path();
  };
  if (rel.empty()) return refuse("an empty path");
  if (rel.find('\0') != std::string_view::npos) return refuse("a path with a NUL byte");
  const fs::path p(rel);
  if (p.is_absolute()) return refuse("an absolute path (give one relative to the run directory)");
  for (const fs::path& part : p)
    if (part == "..") return refuse("a path with a '..' component");
  std::error_code ec;
  const fs::path real_base = fs::canonical(base, ec);
  if (ec) return refuse("a directory that does not exist");
  const fs::path joined = real_base / p;
  if (!lies_inside(real_base, joined)) return refuse("a path that leads outside its directory (a symlink)");
  return fs::weakly_canonical(joined, ec);
}

bool valid_template_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.') return false;
  for (char c : name)
    if (!(std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.')) return false;
  auto ends = [&](std::string_view s) { return name.size() > s.size() && name.substr(name.size() - s.size()) == s; };
  return ends(".yaml") || ends(".yml");
}

}  // namespace seqtrain::serve
