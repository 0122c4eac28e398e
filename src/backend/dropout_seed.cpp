// DropoutSeed's mix_seed; see dropout_seed.h.
#include "backend/dropout_seed.h"

#include "core/error.h"
#include "core/rng.h"

namespace seqtrain {

DropoutSeed mix_seed(const DropoutSeed& seed, uint64_t salt) {
  if (!seed.base) return DropoutSeed(mix_seed(seed.value, salt));
  ST_CHECK(seed.depth < DropoutSeed::kMaxSalts, "internal error: a dropout seed derived {} levels deep; a seed in "
           "device memory keeps at most {}", seed.depth + 1, DropoutSeed::kMaxSalts);
  DropoutSeed s = seed;
  s.salts[s.depth++] = salt;
  return s;
}

}  // namespace seqtrain
