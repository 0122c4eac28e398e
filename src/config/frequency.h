// Frequency: how often the training loop does something, counted in optimizer updates or in
// epochs, as Marian's --valid-freq and nanoGPT's eval_interval are. Written in a config as
// `N` or `Nu` (every N updates) or `Ne` (every N epochs): `train.eval_every: 500u`,
// `train.checkpoint_every: 5e`. Kept as text in Config (so to_yaml writes back what the user
// wrote) and parsed by parse_frequency, whose error names the key and the accepted forms.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace seqtrain {

struct Frequency {
  enum class Unit { updates, epochs };
  int64_t every = 0;  // 0: never
  Unit unit = Unit::updates;

  bool never() const { return every == 0; }
  // Due after the optimizer update that brought the count to `updates`.
  bool due_after_update(int64_t updates) const {
    return unit == Unit::updates && every > 0 && updates % every == 0;
  }
  // Due at the end of epoch `epoch` (0-based): every N-th completed epoch.
  bool due_after_epoch(int64_t epoch) const {
    return unit == Unit::epochs && every > 0 && (epoch + 1) % every == 0;
  }
};

// "500", "500u" -> every 500 updates; "1e" -> every epoch; "0" -> never. Nothing else.
std::optional<Frequency> try_parse_frequency(const std::string& text);
// As above; throws Error naming `key` and the accepted forms (N, Nu, Ne).
Frequency parse_frequency(const std::string& text, const std::string& key);

}  // namespace seqtrain
