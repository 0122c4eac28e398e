// Rng: seeded random numbers with a documented, platform-independent stream.
// Generator: xoshiro256** (Blackman & Vigna), state seeded by SplitMix64 from (seed, stream).
// uniform() takes the top 24 bits of a draw as a float in [0, 1); normal() is Box-Muller
// using two uniforms per pair and caching the second value; add_normal() is the bulk path for
// many draws (Marsaglia & Tsang's ziggurat, 32 random bits per value almost always: several
// times faster, a different stream from normal()). The state can be saved and
// restored exactly (checkpoints use this), so a stream continues bit for bit after resume.
#pragma once
#include <array>
#include <cstdint>

namespace seqtrain {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0);

  uint64_t next_u64();
  float uniform();                       // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  float normal();                        // mean 0, std 1
  uint64_t below(uint64_t n);            // uniform integer in [0, n), n > 0
  // out[0..n) = the next n next_u64() draws, in order: the bulk path (one call, an inlined loop).
  void fill_u64(uint64_t* out, int64_t n);
  // x[i] += scale * z_i for n standard normal z_i drawn by the ziggurat method, two per 64-bit
  // draw in order (so the stream is reproducible; calls in pieces of even length continue it
  // exactly). Leaves the normal() spare alone.
  void add_normal(float* x, int64_t n, float scale);

  struct State { std::array<uint64_t, 4> s; bool has_spare; float spare; };
  State state() const { return {s_, has_spare_, spare_}; }
  void set_state(const State& st) { s_ = st.s; has_spare_ = st.has_spare; spare_ = st.spare; }

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  float spare_ = 0.f;
};

// Derive an independent seed for a named purpose (e.g. hash_seed(seed, epoch, sample)).
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace seqtrain
