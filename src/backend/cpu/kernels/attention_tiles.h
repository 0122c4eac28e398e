// The pieces of backend/cpu/kernels/attention.cpp's tiled attention that its fp32 path and the
// native bf16 path (attention_bf16.cpp, vdpbf16ps products on an AVX512-BF16 CPU) share: the tile
// size, the dropout factors and key flags of a tile row, the online-softmax step, the problem's
// dimensions. Same rules as vec.h: compiled into each level's own files, internal linkage.
#pragma once
#include <cstring>

#include "backend/attention_dropout.h"
#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {

// A call's sizes: batch, sequence, heads, channels, head width D and its padded Dp (vectors),
// the qkv row stride, and the softmax scale 1/sqrt(D).
struct Dims {
  int64_t B, T, H, C, D, Dp, ld;
  float scale;
};


namespace {

constexpr int64_t kTile = 64;  // queries per tile and keys per tile (a multiple of kLanes and 4)

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
inline float fmaxf_(float a, float b) { return a > b ? a : b; }

inline vf vload(const float* p) { vf v; std::memcpy(&v, p, sizeof v); return v; }
inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

inline float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}
inline vf round_bf16(vf x) {
  vu u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The dropout factor of each key column of a tile row: keep_scale where kept, 0 where dropped.
// attention_bits() of backend/attention_dropout.h on this level's vectors (vec.h's hash_bits);
// the flash-vs-reference tests with dropout hold the two to the same mask.
inline void keep_row(const AttentionKernelArgs& a, int64_t b, int64_t h, int64_t i, int64_t j0, float* kf) {
  const uint64_t key = attention_row_key(a.seed, b, h, i);
  vu j = __builtin_convertvector(lane_index(), vu) + static_cast<uint32_t>(j0);
  for (int64_t v = 0; v < kTile; v += kLanes, j += static_cast<uint32_t>(kLanes))
    vstore(kf + v, hash_bits(j, key) >= a.keep_threshold ? splat(a.keep_scale) : splat(0.f));
}

// kv[j] for j < n: 1 where key j of batch row b is real (j < T) and not padding, else 0. The
// per-key half of the mask, made once per task; valid_lanes adds the causal half per row.
inline void key_flags(const AttentionKernelArgs& a, int64_t b, int64_t n, float* kv) {
  const uint8_t* pad = a.key_padding_mask ? a.key_padding_mask + b * a.T : nullptr;
  for (int64_t j = 0; j < n; ++j) kv[j] = j < a.T && !(pad && pad[j]) ? 1.f : 0.f;
}

// Whether the kTile keys from kv hold any real one: a tile of padding only is skipped.
inline bool any_key(const float* kv) {
  for (int64_t k = 0; k < kTile; ++k)
    if (kv[k] != 0.f) return true;
  return false;
}

// Lane k of the vector starting at column v holds key j0 + v + k: 1 where row i may attend to
// it (a real, unpadded key, and j <= i when causal), else 0.
inline vf valid_lanes(const float* kv, bool causal, int64_t j0, int64_t v, int64_t i) {
  const vf ok = vload(kv + j0 + v);
  if (!causal) return ok;
  vf lane;
  for (int64_t k = 0; k < kLanes; ++k) lane[k] = static_cast<float>(k);
  return lane + static_cast<float>(j0 + v) <= static_cast<float>(i) ? ok : splat(0.f);
}

// One query row i of a score tile (s: raw q.k over key columns [j0, j0 + kTile)) through the
// online softmax: updates the row's running max m and sum l, writes the probabilities to p
// (times the dropout factors kf when given, rounded to bf16 when asked; zero above the
// diagonal) and returns alpha = e^(m_old - m_new), the factor the row's output accumulator
// must be rescaled by. l sums the probabilities before dropout: dropout scales the output, not
// the softmax's normalizer. kv: the task's key flags (key_flags).
inline float softmax_row(const Dims& d, const float* s, float* p, const float* kf, const float* kv, bool causal, bool bf16,
                  int64_t j0, int64_t i, float& m, float& l) {
  vf vmax = splat(-__builtin_inff());
  for (int64_t v = 0; v < kTile; v += kLanes) {
    const vf x = vload(s + v) * d.scale;
    vmax = (valid_lanes(kv, causal, j0, v, i) > 0.f) & (x > vmax) ? x : vmax;
  }
  float mx = -__builtin_inff();
  for (int64_t k = 0; k < kLanes; ++k) mx = fmaxf_(mx, vmax[k]);
  const float m_new = fmaxf_(m, mx);
  // 0 at the row's first live tile (m = -inf); 1 while the row has seen no key at all (both
  // -inf: exp(-inf + inf) would be NaN; the accumulator and sum are still 0 then).
  const float alpha = m_new == -__builtin_inff() ? 1.f : __builtin_expf(m - m_new);
  vf vsum = splat(0.f);
  for (int64_t v = 0; v < kTile; v += kLanes) {
    vf e = exp(vload(s + v) * d.scale - m_new);
    e = valid_lanes(kv, causal, j0, v, i) > 0.f ? e : splat(0.f);  // drops inf from masked lanes too
    vsum += e;
    if (kf) e *= vload(kf + v);
    if (bf16) e = round_bf16(e);
    vstore(p + v, e);
  }
  l = l * alpha + hsum(vsum);
  m = m_new;
  return alpha;
}

}  // namespace

inline Dims dims_of(const AttentionKernelArgs& a) {
  const int64_t D = a.C / a.H;
  return {a.B, a.T, a.H, a.C, D, round_up(D, kLanes), 3 * a.C, 1.f / __builtin_sqrtf(static_cast<float>(D))};
}

#if defined(__AVX512BF16__)
// One head's forward / backward with native bf16 products (attention_bf16.cpp), in the same
// workspace slice the fp32 path gets (attention_work_floats): the packed bf16 operands need no
// more room than their fp32 copies.
void forward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w);
void backward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w);
#endif

}  // namespace seqtrain::ST_ISA_NS
