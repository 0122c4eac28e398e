// Frequency parsing: see frequency.h.
#include "config/frequency.h"

#include <cctype>

#include "core/error.h"

namespace seqtrain {

std::optional<Frequency> try_parse_frequency(const std::string& text) {
  if (text.empty()) return std::nullopt;
  Frequency f;
  std::string digits = text;
  const char last = text.back();
  if (last == 'u' || last == 'e') {
    f.unit = last == 'e' ? Frequency::Unit::epochs : Frequency::Unit::updates;
    digits.pop_back();
  }
  if (digits.empty() || digits.size() > 15) return std::nullopt;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  f.every = std::stoll(digits);
  return f;
}

Frequency parse_frequency(const std::string& text, const std::string& key) {
  auto f = try_parse_frequency(text);
  if (!f)
    fail("config key '{}' expects a frequency: N or Nu (every N optimizer updates) or Ne (every N epochs), "
         "e.g. 500u or 1e; got '{}'", key, text);
  return *f;
}

}  // namespace seqtrain
