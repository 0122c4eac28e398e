// ConcatSource and glob_files. glob(3) does the matching (POSIX, no extra dependency).
#include "data/concat.h"

#include <glob.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"

namespace seqtrain {

namespace {
// A directory of the pattern that does not exist is "no file matches" (the usual typo), one that
// exists but cannot be read is the error below.
int glob_error(const char*, int error) { return error != ENOENT && error != ENOTDIR; }
}  // namespace

std::vector<std::string> glob_files(const std::string& pattern, const std::string& key) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, glob_error, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  ST_CHECK(rc == 0 || rc == GLOB_NOMATCH, "{}: cannot read the directories of '{}' (check permissions)", key, pattern);
  ST_CHECK(!out.empty(), "{}: no file matches '{}' (check the path; relative paths are from the working directory)",
           key, pattern);
  std::sort(out.begin(), out.end());
  return out;
}

ConcatSource::ConcatSource(std::vector<std::shared_ptr<const BatchSource>> parts, std::vector<std::string> names)
    : parts_(std::move(parts)) {
  ST_CHECK(!parts_.empty(), "ConcatSource: no parts");
  offsets_.push_back(0);
  for (size_t p = 0; p < parts_.size(); ++p) {
    const auto name = [&] { return p < names.size() ? names[p] : "part " + std::to_string(p); };
    ST_CHECK(parts_[p] != nullptr, "ConcatSource: {} is null", name());
    ST_CHECK(parts_[p]->x_size() == parts_[0]->x_size() && parts_[p]->y_size() == parts_[0]->y_size(),
             "{}: samples of {} x values and {} y values, but {} has {} and {}; every file of a split needs the same "
             "sample shape", name(), parts_[p]->x_size(), parts_[p]->y_size(),
             names.empty() ? "part 0" : names[0], parts_[0]->x_size(), parts_[0]->y_size());
    ST_CHECK(parts_[p]->has_lengths() == parts_[0]->has_lengths(),
             "{} {} sample lengths but {} {}; give every file of a split its lengths (or none)", name(),
             parts_[p]->has_lengths() ? "has" : "has no", names.empty() ? "part 0" : names[0],
             parts_[0]->has_lengths() ? "has" : "has none");
    offsets_.push_back(offsets_.back() + parts_[p]->size());
  }
}

template <typename F>
void ConcatSource::for_runs(std::span<const int64_t> idx, F&& f) const {
  std::vector<int64_t> local;
  size_t b = 0;
  while (b < idx.size()) {
    ST_CHECK(0 <= idx[b] && idx[b] < size(), "sample {} out of range: the files hold {}", idx[b], size());
    const size_t p = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), idx[b]) - offsets_.begin() - 1);
    local.clear();
    const size_t start = b;
    while (b < idx.size() && idx[b] >= offsets_[p] && idx[b] < offsets_[p + 1]) local.push_back(idx[b++] - offsets_[p]);
    f(*parts_[p], std::span<const int64_t>(local), static_cast<int64_t>(start));
  }
}

void ConcatSource::fill(std::span<const int64_t> idx, int64_t epoch, float* x, float* y) const {
  for_runs(idx, [&](const BatchSource& part, std::span<const int64_t> local, int64_t start) {
    part.fill(local, epoch, x ? x + start * x_size() : nullptr, y ? y + start * y_size() : nullptr);
  });
}

void ConcatSource::fill_lengths(std::span<const int64_t> idx, int64_t* lengths) const {
  for_runs(idx, [&](const BatchSource& part, std::span<const int64_t> local, int64_t start) {
    part.fill_lengths(local, lengths + start);
  });
}

}  // namespace seqtrain
