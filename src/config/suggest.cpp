#include "config/suggest.h"

#include <algorithm>
#include <cctype>

namespace seqtrain {
namespace {

std::string last_component(const std::string& s) {
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  // Three rows of the DP table (the transposition looks two back); names are short, never hot.
  std::vector<size_t> two(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], two[j - 2] + 1);
    }
    std::swap(two, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& query, const std::vector<std::string>& candidates) {
  const std::string q = lower(query);
  const std::string q_leaf = last_component(q);
  std::string best;
  size_t best_score = SIZE_MAX;
  for (const auto& cand : candidates) {
    const std::string c = lower(cand);
    size_t score = edit_distance(q, c);
    // A right name at the wrong nesting level costs one extra edit, so a genuine typo at the
    // right level still wins over it.
    if (c.find('.') != std::string::npos || q.find('.') != std::string::npos)
      score = std::min(score, edit_distance(q_leaf, last_component(c)) + 1);
    if (score < best_score) { best_score = score; best = cand; }
  }
  // Allow about one edit in three characters, at least two: close enough to be a typo, far
  // enough that unrelated words are not suggested.
  size_t limit = std::max<size_t>(2, q_leaf.size() / 3);
  return best_score <= limit ? best : std::string();
}

std::string did_you_mean(const std::string& query, const std::vector<std::string>& candidates) {
  std::string m = closest_match(query, candidates);
  return m.empty() ? std::string() : " (did you mean '" + m + "'?)";
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", '" : "'") + items[i] + "'";
  return out;
}

}  // namespace seqtrain
