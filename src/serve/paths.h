// Path checks for everything a request names: a template, a file of a task's run directory, a
// path-valued config override. The service reads and writes only under its root, so every
// name from outside is resolved here (symlinks included) and refused when it would leave it.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace seqtrain::serve {

// `rel` joined to `base` and resolved, symlinks followed, when it stays inside `base`; the
// empty path otherwise, with the reason in *why. Refuses an empty name, an absolute path, a
// '..' component and a NUL byte before touching the file system.
std::filesystem::path resolve_inside(const std::filesystem::path& base, std::string_view rel, std::string* why);

// True when `p` (resolved as far as it exists) lies inside `base` (already canonical).
bool lies_inside(const std::filesystem::path& base, const std::filesystem::path& p);

// A template's name as requests give it: letters, digits, '_', '-' and '.', ending .yaml or
// .yml, no leading dot.
bool valid_template_name(std::string_view name);

}  // namespace seqtrain::serve
