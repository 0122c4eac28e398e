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
// The column vectors that hold `keys` keys: a causal row block needs only those up to its last
// row's diagonal, so the products and the softmax skip the vectors above it (half of every
// diagonal tile; at T <= kTile every tile is one).
inline int64_t key_vectors(int64_t keys) { return (keys + kLanes - 1) / kLanes; }

// The lanes' max and sum in log2(kLanes) dependent steps: the softmax needs both once per row
// per tile, on its critical path, where vec.h's lane-order loops (kLanes - 1 steps) cost more
// than the row's arithmetic at small T.
// (AVX-512's halves through memcpy: GCC 12 warns that its extract intrinsics, and so
// _mm512_reduce_*_ps, read an uninitialized register.)
#if defined(__AVX512F__)
inline __m256 half(vf v, int k) { __m256 x; std::memcpy(&x, reinterpret_cast<const char*>(&v) + 32 * k, 32); return x; }
inline __m256 oct_max(vf v) { return _mm256_max_ps(half(v, 0), half(v, 1)); }
inline __m256 oct_sum(vf v) { return _mm256_add_ps(half(v, 0), half(v, 1)); }
#else
inline vf oct_max(vf v) { return v; }
inline vf oct_sum(vf v) { return v; }
#endif
#if defined(__AVX2__)
inline __m128 quad_max(__m256 v) { return _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
inline __m128 quad_sum(__m256 v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); }
#else
inline __m128 quad_max(__m128 v) { return v; }
inline __m128 quad_sum(__m128 v) { return v; }
#endif
inline float lanes_max(vf v) {
  __m128 x = quad_max(oct_max(v));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
}
inline float lanes_sum(vf v) {
  __m128 x = quad_sum(oct_sum(v));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
}

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

// Stage W of a butterfly transpose of the kLanes x kLanes block r (row i in r[i]): the two W x W
// off-diagonal blocks of every 2W x 2W block trade places; stages W = kLanes / 2 down to 1 leave
// it transposed. Unrolled, each stage is kLanes two-source permutes with constant indices.
template <int64_t W>
inline void transpose_stage(vf* r) {
  vi lo, hi;
  for (int64_t k = 0; k < kLanes; ++k) {
    lo[k] = static_cast<int32_t>(k & W ? kLanes + k - W : k);
    hi[k] = static_cast<int32_t>(k & W ? kLanes + k : k + W);
  }
#pragma GCC unroll 16
  for (int64_t i = 0; i < kLanes; ++i)
    if (!(i & W)) {
      const vf a = r[i], b = r[i + W];
      r[i] = __builtin_shuffle(a, b, lo);
      r[i + W] = __builtin_shuffle(a, b, hi);
    }
  if constexpr (W > 1) transpose_stage<W / 2>(r);
}

// dst[c * ldd + r] = src[r * ld + c] (rounded to bf16 when asked) for r < rows, c < cols, and
// zero for rows <= r < ldd (ldd a multiple of kLanes): a product's transposed operand, a
// kLanes x kLanes block at a time through registers; element by element it was the largest
// single cost of a head at T 64. Lanes are only moved unless bf16, so words of bf16 pairs pass.
inline void transpose_into(const float* src, int64_t ld, int64_t rows, int64_t cols, bool bf16, float* dst,
                           int64_t ldd) {
  const int64_t rows_v = round_up(rows, kLanes);
  for (int64_t r0 = 0; r0 < rows_v; r0 += kLanes)
    for_lanes(cols, [&](auto l) {
      vf r[kLanes];
#pragma GCC unroll 16
      for (int64_t i = 0; i < kLanes; ++i) {
        r[i] = r0 + i < rows ? l.load(src + (r0 + i) * ld) : splat(0.f);
        if (bf16) r[i] = round_bf16(r[i]);
      }
      transpose_stage<kLanes / 2>(r);
#pragma GCC unroll 16
      for (int64_t c = 0; c < kLanes; ++c)
        if (c < l.w) vstore(dst + (l.j + c) * ldd + r0, r[c]);
    });
  for (int64_t c = 0; c < cols; ++c) std::memset(dst + c * ldd + rows_v, 0, sizeof(float) * (ldd - rows_v));
}

// rows x cols of src (row stride ld) into dst [rows_pad][ldd], ldd = round_up(cols, kLanes), zeros
// past them; rounded to bf16 when asked. Whole vectors: only the padding rows need a memset.
inline void copy_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, int64_t rows_pad, int64_t ldd,
                      bool bf16, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for_lanes(cols, [&](auto l) {
      const vf x = l.load(src + r * ld);
      vstore(dst + r * ldd + l.j, bf16 ? round_bf16(x) : x);
    });
  std::memset(dst + rows * ldd, 0, sizeof(float) * (rows_pad - rows) * ldd);
}

// The dropout factor of each key column of a tile row: keep_scale where kept, 0 where dropped.
// attention_bits() of backend/attention_dropout.h on this level's vectors (vec.h's hash_bits);
// the flash-vs-reference tests with dropout hold the two to the same mask.
inline void keep_row(const AttentionKernelArgs& a, int64_t b, int64_t h, int64_t i, int64_t j0, float* kf) {
  const uint64_t key = attention_row_key(resolve_seed(a.seed), b + a.batch_offset, h, i);
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

// One query row i of a score tile (s: raw q.k over key columns [j0, j0 + kTile), of which the
// first nv vectors hold the keys the row may see) through the online softmax: updates the row's
// running max m and sum l, writes the probabilities of those nv vectors to p (times the dropout
// factors kf when given, rounded to bf16 when asked; zero above the diagonal) and returns
// alpha = e^(m_old - m_new), the factor the row's output accumulator must be rescaled by. l sums
// the probabilities before dropout: dropout scales the output, not the softmax's normalizer.
// kv: the task's key flags (key_flags).
// The first pass leaves the scaled scores in s, -inf on masked lanes, so the second needs no mask.
inline float softmax_row(const Dims& d, float* s, float* p, const float* kf, const float* kv, bool causal, bool bf16,
                  int64_t j0, int64_t nv, int64_t i, float& m, float& l) {
  const vf none = splat(-__builtin_inff());
  vf vmax = none;
  for (int64_t v = 0; v < nv * kLanes; v += kLanes) {
    const vf x = valid_lanes(kv, causal, j0, v, i) > 0.f ? vload(s + v) * d.scale : none;
    vstore(s + v, x);
    vmax = x > vmax ? x : vmax;
  }
  const float m_new = fmaxf_(m, lanes_max(vmax));
  // 0 at the row's first live tile (m = -inf; no exp call); 1 while the row has seen no key at
  // all (both -inf: exp(-inf + inf) would be NaN; the accumulator and sum are still 0 then).
  const float alpha = m_new == -__builtin_inff() ? 1.f : m == -__builtin_inff() ? 0.f : __builtin_expf(m - m_new);
  vf vsum = splat(0.f);
  for (int64_t v = 0; v < nv * kLanes; v += kLanes) {
    const vf x = vload(s + v);
    vf e = x == none ? splat(0.f) : exp(x - m_new);  // masked lanes: 0, not exp's NaN of -inf - -inf
    vsum += e;
    if (kf) e *= vload(kf + v);
    if (bf16) e = round_bf16(e);
    vstore(p + v, e);
  }
  l = l * alpha + lanes_sum(vsum);
  m = m_new;
  return alpha;
}

// Rows [i0, i0 + 4) of a backward block from its raw scores S and dP = dy v^T ([4][kTile] each,
// their first nv vectors computed): p recomputed from the saved lse, then the dropped p (p times
// the dropout factors) and dS = p (dP * dropout - D_i) scale written to those vectors of P and
// dS ([4][kTile]), rounded to bf16 when asked.
// Padded query rows (i >= T) get p = 0: their lse is not real; a row that saw no key has lse -inf
// and every lane masked: its p is 0 (the select drops the inf).
inline void probability_rows(const AttentionKernelArgs& a, const Dims& d, const float* S, const float* dP,
                             const float* Di_rows, float* kf, const float* kv, int64_t b, int64_t h, int64_t i0,
                             int64_t j0, int64_t nv, bool bf16, float* P, float* dS) {
  const float* lse = a.lse + (b * d.H + h) * d.T;
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t i = i0 + r;
    const float row_lse = i < d.T ? lse[i] : 0.f, Di = Di_rows[i];
    const vf live = splat(i < d.T ? 1.f : 0.f);
    if (a.dropout) keep_row(a, b, h, i, j0, kf);
    for (int64_t v = 0; v < nv * kLanes; v += kLanes) {
      vf p = exp(vload(S + r * kTile + v) * d.scale - row_lse);
      p = valid_lanes(kv, a.causal, j0, v, i) * live > 0.f ? p : splat(0.f);
      vf dp = vload(dP + r * kTile + v), pd = p;
      if (a.dropout) {
        const vf f = vload(kf + v);
        dp *= f;
        pd *= f;
      }
      vf ds = p * (dp - Di) * d.scale;
      if (bf16) { pd = round_bf16(pd); ds = round_bf16(ds); }
      vstore(P + r * kTile + v, pd);
      vstore(dS + r * kTile + v, ds);
    }
  }
}

}  // namespace

// The keys of key tile j0 that query rows [i0, i0 + 4) may see: up to their diagonal when causal,
// the tile's real keys otherwise. The backward block computes key_vectors() of these columns.
inline int64_t row_keys(const AttentionKernelArgs& a, const Dims& d, int64_t i0, int64_t j0) {
  return imin(kTile, (a.causal ? i0 + 4 : d.T) - j0);
}

// The first row of query tile q0 whose keys reach key block [jb, jb + 4) of key tile j0: rows
// above it see none of those keys when causal (a multiple of 4: q0, j0 are of kTile).
inline int64_t first_row(const AttentionKernelArgs& a, int64_t q0, int64_t j0, int64_t jb) {
  return a.causal && j0 + jb > q0 ? j0 + jb - q0 : 0;
}

// The start of backward's key tile [j0, j0 + kTile), for both precisions: its dk and dv rows
// (kTile x Dp) zeroed; the first query row that sees it (d.T: none, a tile of padding keys only);
// how many of its keys are real positions.
struct KeyTileStart {
  int64_t first_q, keys;
};
inline KeyTileStart start_key_tile(const AttentionKernelArgs& a, const Dims& d, const float* kv, int64_t j0, float* dK,
                                   float* dV) {
  std::memset(dK, 0, sizeof(float) * kTile * d.Dp);
  std::memset(dV, 0, sizeof(float) * kTile * d.Dp);
  return {!any_key(kv + j0) ? d.T : a.causal ? j0 : 0, imin(kTile, d.T - j0)};
}

inline Dims dims_of(const AttentionKernelArgs& a) {
  const int64_t D = a.C / a.H;
  return {a.B, a.T, a.H, a.C, D, round_up(D, kLanes), 3 * a.C, 1.f / __builtin_sqrtf(static_cast<float>(D))};
}

// A forward tile's epilogue: rows [q0, q0 + nq) of head (b, h) from the tile's accumulator O
// (row stride Dp), running max m and sum l: y = O / l and lse = m + log l; a row that saw no key
// (l = 0) gets zeros and lse -inf.
inline void write_tile_rows(const AttentionKernelArgs& a, const Dims& d, const float* O, const float* m,
                            const float* l, int64_t b, int64_t h, int64_t q0, int64_t nq) {
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t i = q0 + r;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    float* y = a.y + (b * d.T + i) * d.C + h * d.D;
    for (int64_t k = 0; k < d.D; ++k) y[k] = O[r * d.Dp + k] * inv;
    a.lse[(b * d.H + h) * d.T + i] = l[r] > 0.f ? m[r] + __builtin_logf(l[r]) : -__builtin_inff();
  }
}

// D_i = rowsum(dy_i * y_i) = rowsum(dP_i * P_i) (with dropout too) for the Tp rows of head
// (b, h), from the fp32 values (0 on padded rows). In vectors: the scalar loop is one dependent
// chain of D adds per row (the compiler may not reorder float sums), as long as the head's
// products at T 64.
inline void row_dots(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, int64_t Tp, float* Di) {
  const float* dy = a.dy + b * d.T * d.C + h * d.D;
  const float* y = a.y + b * d.T * d.C + h * d.D;
  for (int64_t i = 0; i < Tp; ++i) {
    vf acc = splat(0.f);
    if (i < d.T) for_lanes(d.D, [&](auto l) { acc += l.load(dy + i * d.C) * l.load(y + i * d.C); });
    Di[i] = lanes_sum(acc);
  }
}

// Rows [r0, r1) of a padded gradient (row stride Dp, its row 0 = row r0) into column block
// `part` (0 q, 1 k, 2 v) of head (b, h)'s dqkv rows.
inline void write_grad_rows(const AttentionKernelArgs& a, const Dims& d, const float* g, int64_t b, int64_t h,
                            int part, int64_t r0, int64_t r1) {
  float* dqkv = a.dqkv + b * d.T * d.ld + h * d.D + part * d.C;
  for (int64_t j = r0; j < r1; ++j)
    for_lanes(d.D, [&](auto l) { l.store(dqkv + j * d.ld, vload(g + (j - r0) * d.Dp + l.j)); });
}

namespace {

// The per-thread workspace of a forward task (one head): its queries, keys (transposed) and
// values, packed once for all of the head's query tiles; a 4-row score and probability tile; a
// query tile's output accumulator, running max and sum; one row of dropout factors; the key
// flags.
struct ForwardWork {
  float *Q, *Kt, *V, *S, *P, *O, *m, *l, *kf, *kv;
};
inline ForwardWork forward_work(const Dims& d, int64_t Tp, float* w) {
  ForwardWork f;
  f.Q = w;
  f.Kt = f.Q + Tp * d.Dp;
  f.V = f.Kt + d.D * Tp;
  f.S = f.V + Tp * d.Dp;
  f.P = f.S + 4 * kTile;
  f.O = f.P + 4 * kTile;
  f.m = f.O + kTile * d.Dp;
  f.l = f.m + kTile;
  f.kf = f.l + kTile;
  f.kv = f.kf + kTile;
  return f;
}
inline int64_t forward_floats(const Dims& d, int64_t Tp) {
  return 2 * Tp * d.Dp + d.D * Tp + kTile * d.Dp + 11 * kTile + Tp;
}

// The online-softmax state of one forward query tile, in its task's workspace: the 4-row score
// and probability tiles, the tile's output accumulator (row stride Dp), running max and sum, one
// row of dropout factors, the head's key flags.
struct ForwardTile {
  float *S, *P, *O, *m, *l, *kf, *kv;
};

// Queries [q0, q0 + kTile) of head (b, h): y rows and their logsumexp. The products come from
// the caller: scores(i0, j0, nv) fills the first nv vectors of tile.S's 4 rows with the raw
// q k^T of rows [i0, i0 + 4) and key tile j0; accumulate(rb, j0, keys, nv) adds tile.P's 4 rows
// (nv vectors written) times the key tile's first `keys` rows of v into tile.O's rows
// [rb, rb + 4). Causal: key tiles up to the block's last row, the ones above
// the diagonal never visited; key tiles of padding only skipped.
template <class Scores, class Accumulate>
void forward_tile(const AttentionKernelArgs& a, const Dims& d, const ForwardTile& f, int64_t b, int64_t h,
                  int64_t q0, Scores scores, Accumulate accumulate) {
  // Keys [0, kend): up to the tile's last query when causal, all of them otherwise.
  const int64_t nq = imin(kTile, d.T - q0), kend = a.causal ? q0 + nq : d.T;
  std::memset(f.O, 0, sizeof(float) * kTile * d.Dp);
  for (int64_t r = 0; r < kTile; ++r) { f.m[r] = -__builtin_inff(); f.l[r] = 0.f; }
  for (int64_t rb = 0; rb < nq; rb += 4) {
    const int64_t i0 = q0 + rb, jend = a.causal ? imin(i0 + 4, kend) : kend;
    for (int64_t j0 = 0; j0 < jend; j0 += kTile) {
      if (!any_key(f.kv + j0)) continue;
      const int64_t keys = imin(kTile, jend - j0), nv = key_vectors(keys);
      scores(i0, j0, nv);
      for (int64_t r = 0; r < 4; ++r) {
        if (a.dropout) keep_row(a, b, h, i0 + r, j0, f.kf);
        const float alpha = softmax_row(d, f.S + r * kTile, f.P + r * kTile, a.dropout ? f.kf : nullptr, f.kv,
                                        a.causal, a.bf16, j0, nv, i0 + r, f.m[rb + r], f.l[rb + r]);
        float* o = f.O + (rb + r) * d.Dp;
        if (alpha != 1.f)
          for (int64_t v = 0; v < d.Dp; v += kLanes) vstore(o + v, vload(o + v) * alpha);
      }
      accumulate(rb, j0, keys, nv);  // past `keys` every row's p is 0; past nv vectors P is stale
    }
  }
  write_tile_rows(a, d, f.O, f.m, f.l, b, h, q0, nq);
}

}  // namespace

#if defined(__AVX512BF16__)
// One head's forward / backward with native bf16 products (attention_bf16.cpp), in the same
// workspace slice the fp32 path gets (attention_work_floats): the packed bf16 operands need no
// more room than their fp32 copies.
void forward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w);
void backward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w);
#endif

}  // namespace seqtrain::ST_ISA_NS
