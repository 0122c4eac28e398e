// seed_mix: mix_seed's arithmetic (core/rng.h), callable from CUDA kernels too: a captured step's
// dropout masks derive their seeds from the step's seed on the device (backend/dropout_seed.h)
// exactly as the host derives them. Internal linkage: per-ISA kernel files may include it.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace seqtrain {
namespace {

ST_HOST_DEVICE inline uint64_t seed_splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

ST_HOST_DEVICE inline uint64_t seed_mix(uint64_t a, uint64_t b) {
  uint64_t x = a ^ ((b << 32) | (b >> 32)) ^ 0x6a09e667f3bcc909ULL;
  seed_splitmix64(x);
  return seed_splitmix64(x) ^ b;
}

}  // namespace
}  // namespace seqtrain
