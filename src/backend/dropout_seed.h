// DropoutSeed: the seed of a dropout or attention-dropout mask as the backend's ops take it.
// Either a value (what a layer derived on the host, as before), or the step's seed in the
// backend's memory with the mix_seed salts the layers applied on the way down, which the op
// applies as it runs (resolve_seed). A captured step (train/step_graphs.h) needs the second: a
// replay launches the masks of its capture, and only memory the step writes before the launch
// can give them the step's seed; the masks are the same bits either way. A plain struct: CUDA
// kernels take it by value.
#pragma once
#include <cstdint>

#include "core/host_device.h"
#include "core/seed_mix.h"

namespace seqtrain {

struct DropoutSeed {
  static constexpr int kMaxSalts = 8;
  uint64_t value = 0;              // the seed, when base is null
  const uint64_t* base = nullptr;  // else the step's seed, in the backend's memory
  uint64_t salts[kMaxSalts] = {};  // mix_seed(…, salt) to apply to *base, in order
  int32_t depth = 0;

  DropoutSeed() = default;
  DropoutSeed(uint64_t v) : value(v) {}  // NOLINT: a host seed is a DropoutSeed, as before
  // The step's seed at `base` (device memory of the backend that runs the masks).
  static DropoutSeed at(const uint64_t* base) {
    DropoutSeed s;
    s.base = base;
    return s;
  }
};

// mix_seed(seed, salt) for a DropoutSeed: applied now to a value, recorded for a seed in memory
// (an Error past kMaxSalts levels, a nesting no model has).
DropoutSeed mix_seed(const DropoutSeed& seed, uint64_t salt);

namespace {
// The mask's seed: the value, or *base mixed with the salts (where the memory is readable: on the
// host for a host-memory backend, in the kernel on a device).
ST_HOST_DEVICE inline uint64_t resolve_seed(const DropoutSeed& s) {
  uint64_t v = s.base ? *s.base : s.value;
  for (int32_t i = 0; i < s.depth; ++i) v = seed_mix(v, s.salts[i]);
  return v;
}
}  // namespace

}  // namespace seqtrain
