// Attention with native bf16 products, for the AVX512-BF16 level only (the other levels compile
// this file empty): the same tiles, online softmax, dropout and rounding points as
// attention.cpp's bf16 mode, but every product runs on vdpbf16ps, which multiplies pairs of bf16
// values and adds both products to an fp32 lane: 16 columns x 2 steps of the inner dimension per
// instruction, twice the work of an fp32 FMA. attention.cpp's bf16 mode rounds the operands and
// multiplies them with fp32 FMAs: bf16's numerics without its speed.
//
// vdpbf16ps wants each 32-bit lane of both operands to hold two consecutive elements of the inner
// dimension k. Operands are therefore packed once per head as bf16 in one of two layouts:
//   rows     X[r][k]: row-major, Dp columns — a pair (k, k+1) of one row is one 32-bit word;
//   pairs    X2[r/2][c][2]: rows r and r+1 interleaved — the pair (X[r][c], X[r+1][c]) is one word,
//            which is what a product whose inner dimension runs over rows needs.
// and a transposed word matrix Kt2[k/2][j] (the words of K's rows, transposed) for q k^T. The
// micro-kernel broadcasts one word of A and multiplies it against NV vectors of B's words.
//
// Results differ from the fp32-FMA bf16 mode only in summation order (each instruction adds the
// k+1 product, then the k product, to the lane, rounding in between): both are exact products of
// the same rounded operands accumulated in fp32.
#include "backend/cpu/kernels/level.h"  // defines nothing: the levels without bf16 get an empty file

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include "backend/cpu/kernels/attention_tiles.h"

namespace seqtrain::ST_ISA_NS {
namespace {

static_assert(kLanes == 16, "the tiles' column vectors (key_vectors) are the 16 lanes of one vdpbf16ps");

// Loads and stores through these may alias the float workspace the words are carved from.
using u16a = uint16_t __attribute__((may_alias));
using u32a = uint32_t __attribute__((may_alias));

// C[r, 0:16 NV) (+)= sum over word steps p < P of A(r, p) . B[p, :], for the 4 rows r, where
// A(r, p) is the word at A[r * ar + p * ak] and B's word rows are ldb words apart.
template <int NV>
inline void mk4_bf16_cols(const u32a* A, int64_t ar, int64_t ak, const u32a* B, int64_t ldb, int64_t P, float* C,
                          int64_t ldc, bool accumulate) {
  __m512 c[4][NV];
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? _mm512_loadu_ps(C + r * ldc + v * 16) : _mm512_setzero_ps();
  for (int64_t p = 0; p < P; ++p) {
    __m512bh b[NV];
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(B + p * ldb + v * 16);
    const u32a* a_p = A + p * ak;
    for (int r = 0; r < 4; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(a_p[r * ar]));
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], a, b[v]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(C + r * ldc + v * 16, c[r][v]);
}

// nv = columns / 16; two column vectors at a time (8 independent accumulator chains).
inline void mk4_bf16(const u32a* A, int64_t ar, int64_t ak, const u32a* B, int64_t ldb, int64_t P, float* C,
                     int64_t ldc, int64_t nv, bool accumulate) {
  int64_t v = 0;
  for (; v + 2 <= nv; v += 2) mk4_bf16_cols<2>(A, ar, ak, B + v * 16, ldb, P, C + v * 16, ldc, accumulate);
  if (v < nv) mk4_bf16_cols<1>(A, ar, ak, B + v * 16, ldb, P, C + v * 16, ldc, accumulate);
}

// The bits of bf16(x) in the high half of each 32-bit lane, zeros below: round to nearest even
// on the bits (vcvtneps2bf16 would flush denormals, which the FMA path keeps). Vector-extension
// shifts and conversions, not intrinsics: GCC 12 warns that those read an uninitialized register.
using vh = uint16_t __attribute__((vector_size(32)));
inline vu bits_of(vf x) {
  vu u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline vu bf16_high(vf x) { return bits_of(round_bf16(x)); }

// rows x D of a head (row stride ld) rounded to bf16 into dst [rows_pad, Dp] (rows layout), zeros
// past them.
void pack_rows_bf16(const float* src, int64_t ld, int64_t rows, int64_t D, int64_t rows_pad, int64_t Dp, u16a* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for_lanes(D, [&](auto l) {
      const vh h = __builtin_convertvector(bf16_high(l.load(src + r * ld)) >> 16, vh);
      std::memcpy(dst + r * Dp + l.j, &h, sizeof h);
    });
  std::memset(dst + rows * Dp, 0, sizeof(uint16_t) * (rows_pad - rows) * Dp);
}

// The same rows in the pairs layout [rows_pad / 2, Dp, 2] (rows_pad even): each word from one
// column of two rows, so whole vectors of words come from two row loads, lane by lane.
void pack_pairs_bf16(const float* src, int64_t ld, int64_t rows, int64_t D, int64_t rows_pad, int64_t Dp,
                     u16a* dst2) {
  u32a* w = reinterpret_cast<u32a*>(dst2);
  for (int64_t r = 0; r < rows; r += 2)
    for_lanes(D, [&](auto l) {
      const vu lo = bf16_high(l.load(src + r * ld)) >> 16;
      const vu hi = r + 1 < rows ? bf16_high(l.load(src + (r + 1) * ld)) : vu{};
      const vu word = lo | hi;
      std::memcpy(w + (r / 2) * Dp + l.j, &word, sizeof word);
    });
  const int64_t done = round_up(rows, 2);
  std::memset(w + (done / 2) * Dp, 0, sizeof(uint32_t) * (rows_pad - done) / 2 * Dp);
}

// The words of the rows layout X [rows_pad, Dp] transposed: Xt2[p][j] = word p of row j, for the
// P = ceil(D / 2) words that hold data.
void words_transposed(const u16a* X, int64_t rows_pad, int64_t Dp, int64_t P, u32a* Xt2) {
  transpose_into(reinterpret_cast<const float*>(X), Dp / 2, rows_pad, P, false, reinterpret_cast<float*>(Xt2),
                 rows_pad);
}

// The first nv vectors of four fp32 rows [4][kTile] of bf16-representable values into bf16 rows
// (row stride kTile).
void store_rows_bf16(const float* src, int64_t nv, u16a* dst) {
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t v = 0; v < nv * 16; v += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + r * kTile + v),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + r * kTile + v)));
}

// Rows [i, i + 4) of a tile (fp32, row stride kTile, i even; the first nv vectors; values
// bf16-representable: their low halves are zero) into the pairs layout of the tile:
// word (i / 2, j) = (row i, row i + 1) at column j.
void store_pairs_bf16(const float* src, int64_t i, int64_t nv, u16a* dst2) {
  u32a* w = reinterpret_cast<u32a*>(dst2);
  for (int64_t r = 0; r < 4; r += 2)
    for (int64_t v = 0; v < nv * 16; v += 16) {
      const vu word = bits_of(vload(src + r * kTile + v)) >> 16 | bits_of(vload(src + (r + 1) * kTile + v));
      std::memcpy(w + ((i + r) / 2) * kTile + v, &word, sizeof word);
    }
}

const u32a* words(const u16a* p) { return reinterpret_cast<const u32a*>(p); }

// ---- forward ----

struct ForwardBf16 {
  ForwardWork w;  // the fp32 path's slice: S, the fp32 P, O, m, l, kf, kv used as they are
  u16a* Q;        // rows [Tp, Dp], in w.Q's room
  u32a* Kt2;      // [P, Tp] words, in w.Kt's room
  u16a* V2;       // pairs [Tp / 2, Dp, 2], in w.V's room
  u16a* P16;      // rows [4, kTile], in w.S's room (S is consumed into w.P before P16 is written)
};

// Carved from the fp32 path's slice (forward_work): each bf16 array takes at most the room of
// the fp32 array it replaces.
ForwardBf16 forward_bf16_work(const Dims& d, int64_t Tp, float* w) {
  const ForwardWork w32 = forward_work(d, Tp, w);
  return {w32, reinterpret_cast<u16a*>(w32.Q), reinterpret_cast<u32a*>(w32.Kt), reinterpret_cast<u16a*>(w32.V),
          reinterpret_cast<u16a*>(w32.S)};
}

// ---- backward ----

struct BackwardBf16 {
  u16a *Q, *Q2, *K2, *dY, *dY2;  // rows / pairs layouts
  u32a *Kt2, *Vt2;               // [P, Tp] words
  float *dQ, *dK, *dV, *S, *dP, *Pf, *dSf, *Di, *kf, *kv;
  u16a *P2, *dS16, *dS2;         // the query tile's p (pairs), dS (rows and pairs)
};

// Carved from the fp32 path's slice (attention.cpp's backward_work layout and sizes).
BackwardBf16 backward_bf16_work(const Dims& d, int64_t Tp, float* w) {
  const int64_t rows = Tp * d.Dp, cols = d.D * Tp, tile = kTile * d.Dp, sq = kTile * kTile;
  float* Qf = w;
  float* Kf = Qf + rows;
  float* dYf = Kf + rows;
  BackwardBf16 g;
  g.dQ = dYf + rows;
  float* Ktf = g.dQ + rows;
  float* Vtf = Ktf + cols;
  g.dK = Vtf + cols;
  g.dV = g.dK + tile;
  g.S = g.dV + tile;
  g.dP = g.S + 4 * kTile;
  float* Pt = g.dP + 4 * kTile;
  float* dSt = Pt + sq;
  g.Di = dSt + sq;
  g.kf = g.Di + Tp;
  g.kv = g.kf + kTile;
  g.Q = reinterpret_cast<u16a*>(Qf);
  g.Q2 = g.Q + rows;  // the second half of Q's fp32 room
  g.K2 = reinterpret_cast<u16a*>(Kf);
  g.dY = reinterpret_cast<u16a*>(dYf);
  g.dY2 = g.dY + rows;
  g.Kt2 = reinterpret_cast<u32a*>(Ktf);
  g.Vt2 = reinterpret_cast<u32a*>(Vtf);
  g.P2 = reinterpret_cast<u16a*>(Pt);
  g.Pf = Pt + sq / 2;         // 4 fp32 rows in the unused half of P's room
  g.dSf = g.Pf + 4 * kTile;
  g.dS16 = reinterpret_cast<u16a*>(dSt);
  g.dS2 = g.dS16 + sq;
  return g;
}

// Rows [i0, i0 + 4) of a (query tile x key tile) block, as attention.cpp's backward_rows, with
// bf16 products; the dropped p and dS go to the tile's pairs layouts (and dS to its rows).
void backward_rows_bf16(const AttentionKernelArgs& a, const Dims& d, const BackwardBf16& g, int64_t b, int64_t h,
                        int64_t Tp, int64_t i0, int64_t rb, int64_t j0) {
  const int64_t Dp = d.Dp, P = (d.D + 1) / 2, nv = key_vectors(row_keys(a, d, i0, j0));
  mk4_bf16(words(g.Q) + i0 * (Dp / 2), Dp / 2, 1, g.Kt2 + j0, Tp, P, g.S, kTile, nv, false);
  mk4_bf16(words(g.dY) + i0 * (Dp / 2), Dp / 2, 1, g.Vt2 + j0, Tp, P, g.dP, kTile, nv, false);
  probability_rows(a, d, g.S, g.dP, g.Di, g.kf, g.kv, b, h, i0, j0, nv, true, g.Pf, g.dSf);
  store_pairs_bf16(g.Pf, rb, nv, g.P2);
  store_pairs_bf16(g.dSf, rb, nv, g.dS2);
  store_rows_bf16(g.dSf, nv, g.dS16 + rb * kTile);
}

void backward_key_tile_bf16(const AttentionKernelArgs& a, const Dims& d, const BackwardBf16& g, int64_t b,
                            int64_t h, int64_t Tp, int64_t j0) {
  const int64_t Dp = d.Dp, nvd = Dp / 16;
  const auto [first_q, tile_keys] = start_key_tile(a, d, g.kv, j0, g.dK, g.dV);
  for (int64_t q0 = first_q; q0 < d.T; q0 += kTile) {
    const int64_t rows = round_up(imin(kTile, d.T - q0), 4);
    for (int64_t rb = 0; rb < rows; rb += 4) backward_rows_bf16(a, d, g, b, h, Tp, q0 + rb, rb, j0);
    // dv += p^T dy and dk += dS^T q: the inner dimension is the tile's query rows, in pairs, from
    // the first that sees the key block (first_row: a multiple of 4, so a whole pair).
    for (int64_t jb = 0; jb < tile_keys; jb += 4) {
      const int64_t r0 = first_row(a, q0, j0, jb), steps = (rows - r0) / 2;
      mk4_bf16(words(g.P2) + (r0 / 2) * kTile + jb, 1, kTile, words(g.dY2) + ((q0 + r0) / 2) * Dp, Dp, steps,
               g.dV + jb * Dp, Dp, nvd, true);
      mk4_bf16(words(g.dS2) + (r0 / 2) * kTile + jb, 1, kTile, words(g.Q2) + ((q0 + r0) / 2) * Dp, Dp, steps,
               g.dK + jb * Dp, Dp, nvd, true);
    }
    for (int64_t rb = 0; rb < rows; rb += 4) {  // dq += dS k
      const int64_t keys = row_keys(a, d, q0 + rb, j0);
      mk4_bf16(words(g.dS16) + rb * (kTile / 2), kTile / 2, 1, words(g.K2) + (j0 / 2) * Dp, Dp, (keys + 1) / 2,
               g.dQ + (q0 + rb) * Dp, Dp, nvd, true);
    }
  }
  const int64_t j1 = imin(d.T, j0 + kTile);
  write_grad_rows(a, d, g.dK, b, h, 1, j0, j1);
  write_grad_rows(a, d, g.dV, b, h, 2, j0, j1);
}

}  // namespace

void forward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w) {
  const int64_t Tp = round_up(d.T, kTile);
  const ForwardBf16 f = forward_bf16_work(d, Tp, w);
  const float* head = a.qkv + b * d.T * d.ld + h * d.D;
  pack_rows_bf16(head, d.ld, d.T, d.D, Tp, d.Dp, f.Q);
  // K's rows go through V's room (packed to V2 right after) on their way to Kt2.
  pack_rows_bf16(head + d.C, d.ld, d.T, d.D, Tp, d.Dp, f.V2);
  words_transposed(f.V2, Tp, d.Dp, (d.D + 1) / 2, f.Kt2);
  pack_pairs_bf16(head + 2 * d.C, d.ld, d.T, d.D, Tp, d.Dp, f.V2);
  key_flags(a, b, Tp, f.w.kv);
  const ForwardTile tile{f.w.S, f.w.P, f.w.O, f.w.m, f.w.l, f.w.kf, f.w.kv};
  const int64_t Dp = d.Dp;
  auto scores = [&](int64_t i0, int64_t j0, int64_t nv) {
    mk4_bf16(words(f.Q) + i0 * (Dp / 2), Dp / 2, 1, f.Kt2 + j0, Tp, (d.D + 1) / 2, f.w.S, kTile, nv, false);
  };
  auto accumulate = [&](int64_t rb, int64_t j0, int64_t keys, int64_t nv) {
    store_rows_bf16(f.w.P, nv, f.P16);
    mk4_bf16(words(f.P16), kTile / 2, 1, words(f.V2) + (j0 / 2) * Dp, Dp, (keys + 1) / 2, f.w.O + rb * Dp, Dp,
             Dp / 16, true);
  };
  for (int64_t q0 = 0; q0 < d.T; q0 += kTile) forward_tile(a, d, tile, b, h, q0, scores, accumulate);
}

void backward_head_bf16(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w) {
  const int64_t Tp = round_up(d.T, kTile), Dp = d.Dp, P = (d.D + 1) / 2;
  const BackwardBf16 g = backward_bf16_work(d, Tp, w);
  const float* head = a.qkv + b * d.T * d.ld + h * d.D;
  const float* dy = a.dy + b * d.T * d.C + h * d.D;
  pack_rows_bf16(head, d.ld, d.T, d.D, Tp, Dp, g.Q);
  pack_pairs_bf16(head, d.ld, d.T, d.D, Tp, Dp, g.Q2);
  pack_rows_bf16(dy, d.C, d.T, d.D, Tp, Dp, g.dY);
  pack_pairs_bf16(dy, d.C, d.T, d.D, Tp, Dp, g.dY2);
  pack_pairs_bf16(head + d.C, d.ld, d.T, d.D, Tp, Dp, g.K2);
  // K and V rows pass through the free half of K's room on their way to Kt2 and Vt2.
  u16a* tmp = g.K2 + Tp * Dp;
  pack_rows_bf16(head + d.C, d.ld, d.T, d.D, Tp, Dp, tmp);
  words_transposed(tmp, Tp, Dp, P, g.Kt2);
  pack_rows_bf16(head + 2 * d.C, d.ld, d.T, d.D, Tp, Dp, tmp);
  words_transposed(tmp, Tp, Dp, P, g.Vt2);
  std::memset(g.dQ, 0, sizeof(float) * Tp * Dp);
  key_flags(a, b, Tp, g.kv);
  row_dots(a, d, b, h, Tp, g.Di);
  for (int64_t j0 = 0; j0 < d.T; j0 += kTile) backward_key_tile_bf16(a, d, g, b, h, Tp, j0);
  write_grad_rows(a, d, g.dQ, b, h, 0, 0, d.T);
}

}  // namespace seqtrain::ST_ISA_NS
#endif  // __AVX512BF16__
