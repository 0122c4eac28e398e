// Self-attention on the CPU in FlashAttention's scheme (Dao et al. 2022; the backward in
// FlashAttention-2's loop order): tiles of kTile queries x kTile keys, an online softmax (running
// max and sum per query row), the T x T score matrix never stored. Causal: tiles wholly above
// the diagonal are skipped; non-causal: every key tile is visited. A key-padding mask excludes
// its keys inside the online softmax (their lanes are masked like those above the diagonal), and
// key tiles holding only padding are skipped (exactly: they would add nothing). A row that sees
// no key at all ends with sum 0: its output is zeros and its lse -inf (backend.h's choice).
// Backward recomputes each probability tile from the saved logsumexp.
//
// Every product is one register-blocked micro-kernel (mk4: 4 rows of C, two vectors of columns
// at a time, an FMA per A element broadcast against a row of B), on per-head copies of q, k, v
// repacked contiguous and zero-padded (rows to the tile, columns to the vector width), K and V
// also transposed where a product wants keys along the vector. Padding is harmless: padded keys
// (rows past T) are masked as keys (key_flags), padded columns are zero.
//
// Threads: forward runs one task per (b, h), its q, k and v packed once for all query tiles;
// backward one per (b, h), which owns that head's dq, dk and dv columns outright and walks key
// tiles then query tiles serially, so dk, dv and dq accumulate without atomics in a fixed order. Each task is serial: results are
// bitwise the same for any thread count. The dropout mask is backend/attention_dropout.h's.
//
// bf16: q, k, v, the (dropped) probabilities, dy and dS are rounded to bf16 (round to nearest
// even) where they enter a product; accumulation, the softmax, lse and D_i stay fp32. The
// rounding is done in fp32 registers (a product of two bf16 values is exact in fp32), which is
// bf16's numerics; on an AVX512-BF16 CPU the heads run attention_bf16.cpp instead, the same
// scheme with the products on vdpbf16ps (bf16's speed).
#include <cstdlib>
#include <cstring>

#include <omp.h>

#include "backend/cpu/kernels/attention_tiles.h"

namespace seqtrain::ST_ISA_NS {
namespace {

// C[r, 0:N) (+)= sum_k A[r * ar + k * ak] * B[k * ldb + 0:N) for the 4 rows r, N = nv * kLanes.
// A's elements are broadcast one at a time, so reading it along either axis costs the same: a
// product with a transposed A (p^T dy, dS^T q) takes ar = 1, ak = the row stride, and no tile
// is ever transposed in memory. Two column vectors at a time: 8 independent accumulator chains
// hide the FMA latency.
template <int NV>
inline void mk4_cols(const float* A, int64_t ar, int64_t ak, const float* B, int64_t ldb, int64_t K, float* C,
                     int64_t ldc, bool accumulate) {
  vf c[4][NV];
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = accumulate ? vload(C + r * ldc + v * kLanes) : splat(0.f);
  for (int64_t k = 0; k < K; ++k) {
    vf b[NV];
    for (int v = 0; v < NV; ++v) b[v] = vload(B + k * ldb + v * kLanes);
    const float* a_k = A + k * ak;
    for (int r = 0; r < 4; ++r) {
      const vf a = splat(a_k[r * ar]);
      for (int v = 0; v < NV; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < NV; ++v) vstore(C + r * ldc + v * kLanes, c[r][v]);
}

inline void mk4_strided(const float* A, int64_t ar, int64_t ak, const float* B, int64_t ldb, int64_t K, float* C,
                        int64_t ldc, int64_t nv, bool accumulate) {
  int64_t v = 0;
  for (; v + 2 <= nv; v += 2) mk4_cols<2>(A, ar, ak, B + v * kLanes, ldb, K, C + v * kLanes, ldc, accumulate);
  if (v < nv) mk4_cols<1>(A, ar, ak, B + v * kLanes, ldb, K, C + v * kLanes, ldc, accumulate);
}
// A row-major with row stride lda (A[r * lda + k]).
inline void mk4(const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K, float* C, int64_t ldc,
                int64_t nv, bool accumulate) {
  mk4_strided(A, lda, 1, B, ldb, K, C, ldc, nv, accumulate);
}
// A read transposed: row r of the product is column r of At (At[k * ldat + r]).
inline void mk4_at(const float* At, int64_t ldat, const float* B, int64_t ldb, int64_t K, float* C, int64_t ldc,
                   int64_t nv, bool accumulate) {
  mk4_strided(At, 1, ldat, B, ldb, K, C, ldc, nv, accumulate);
}

// Head (b, h): its q, k, v packed once, then every query tile.
void forward_head(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w) {
#if defined(__AVX512BF16__)
  if (a.bf16) return forward_head_bf16(a, d, b, h, w);  // native bf16 products
#endif
  const int64_t Tp = round_up(d.T, kTile);
  const ForwardWork f = forward_work(d, Tp, w);
  const float* head = a.qkv + b * d.T * d.ld + h * d.D;
  copy_rows(head, d.ld, d.T, d.D, Tp, d.Dp, a.bf16, f.Q);
  transpose_into(head + d.C, d.ld, d.T, d.D, a.bf16, f.Kt, Tp);
  copy_rows(head + 2 * d.C, d.ld, d.T, d.D, Tp, d.Dp, a.bf16, f.V);
  key_flags(a, b, Tp, f.kv);
  const ForwardTile tile{f.S, f.P, f.O, f.m, f.l, f.kf, f.kv};
  const int64_t Dp = d.Dp;
  auto scores = [&](int64_t i0, int64_t j0, int64_t nv) {
    mk4(f.Q + i0 * Dp, Dp, f.Kt + j0, Tp, d.D, f.S, kTile, nv, false);
  };
  auto accumulate = [&](int64_t rb, int64_t j0, int64_t keys, int64_t) {
    mk4(f.P, kTile, f.V + j0 * Dp, Dp, keys, f.O + rb * Dp, Dp, Dp / kLanes, true);
  };
  for (int64_t q0 = 0; q0 < d.T; q0 += kTile) forward_tile(a, d, tile, b, h, q0, scores, accumulate);
}

}  // namespace

// head(a, d, b, h, workspace) for every (b, h), one task each, each thread its own workspace.
template <class Head>
void for_each_head(const AttentionKernelArgs& a, bool backward, Head head) {
  const Dims d = dims_of(a);
  const int64_t tasks = d.B * d.H, stride = attention_work_floats(a, backward);
#pragma omp parallel for schedule(dynamic) if (tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) head(a, d, t / d.H, t % d.H, a.work + omp_get_thread_num() * stride);
}

void attention_forward(const AttentionKernelArgs& a) { for_each_head(a, false, forward_head); }

namespace {

// The per-thread workspace of a backward task (one head): q, k, dy rows and k, v transposed,
// all zero-padded to Tp rows; dq for the head; dk and dv of one key tile; a query tile's
// dropped probabilities and dS (row-major; the products that want them transposed read them so);
// D_i; one row of dropout factors; the key flags.
struct BackwardWork {
  float *Q, *K, *dY, *Kt, *Vt, *dQ, *dK, *dV, *S, *dP, *P, *dS, *Di, *kf, *kv;
};
BackwardWork backward_work(const Dims& d, int64_t Tp, float* w) {
  BackwardWork g;
  const int64_t rows = Tp * d.Dp, cols = d.D * Tp, tile = kTile * d.Dp, sq = kTile * kTile;
  g.Q = w; g.K = g.Q + rows; g.dY = g.K + rows; g.dQ = g.dY + rows;
  g.Kt = g.dQ + rows; g.Vt = g.Kt + cols;
  g.dK = g.Vt + cols; g.dV = g.dK + tile;
  g.S = g.dV + tile; g.dP = g.S + 4 * kTile;
  g.P = g.dP + 4 * kTile; g.dS = g.P + sq;
  g.Di = g.dS + sq; g.kf = g.Di + Tp; g.kv = g.kf + kTile;
  return g;
}
int64_t backward_floats(const Dims& d, int64_t Tp) {
  return 4 * Tp * d.Dp + 2 * d.D * Tp + 2 * kTile * d.Dp + 8 * kTile + 2 * kTile * kTile + 2 * Tp + kTile;
}

// Rows [i0, i0 + 4) of a (query tile x key tile) block: recompute p from lse, then
// dP = (dy v^T) * dropout, dS = p * (dP - D_i) * scale; write the dropped p and dS rows' first nv
// vectors (the keys the rows may see).
void backward_rows(const AttentionKernelArgs& a, const Dims& d, const BackwardWork& g, int64_t b, int64_t h,
                   int64_t Tp, int64_t i0, int64_t j0, int64_t nv, float* P, float* dS) {
  mk4(g.Q + i0 * d.Dp, d.Dp, g.Kt + j0, Tp, d.D, g.S, kTile, nv, false);
  mk4(g.dY + i0 * d.Dp, d.Dp, g.Vt + j0, Tp, d.D, g.dP, kTile, nv, false);
  probability_rows(a, d, g.S, g.dP, g.Di, g.kf, g.kv, b, h, i0, j0, nv, a.bf16, P, dS);
}

// Key tile [j0, j0 + kTile) against every query tile at or below it when causal, every query
// tile otherwise (FlashAttention-2's order): dv and dk of the key tile accumulate over query
// tiles, dq of each query tile over key tiles. A tile of padding keys only gets dk = dv = 0.
void backward_key_tile(const AttentionKernelArgs& a, const Dims& d, const BackwardWork& g, int64_t b, int64_t h,
                       int64_t Tp, int64_t j0) {
  const int64_t Dp = d.Dp, nvd = Dp / kLanes;
  const auto [first_q, tile_keys] = start_key_tile(a, d, g.kv, j0, g.dK, g.dV);
  for (int64_t q0 = first_q; q0 < d.T; q0 += kTile) {
    const int64_t rows = round_up(imin(kTile, d.T - q0), 4);
    for (int64_t rb = 0; rb < rows; rb += 4)
      backward_rows(a, d, g, b, h, Tp, q0 + rb, j0, key_vectors(row_keys(a, d, q0 + rb, j0)), g.P + rb * kTile,
                    g.dS + rb * kTile);
    for (int64_t jb = 0; jb < tile_keys; jb += 4) {
      const int64_t r0 = first_row(a, q0, j0, jb);  // rows above it would read P's unwritten vectors
      mk4_at(g.P + r0 * kTile + jb, kTile, g.dY + (q0 + r0) * Dp, Dp, rows - r0, g.dV + jb * Dp, Dp, nvd,
             true);  // dv += p^T dy
      mk4_at(g.dS + r0 * kTile + jb, kTile, g.Q + (q0 + r0) * Dp, Dp, rows - r0, g.dK + jb * Dp, Dp, nvd,
             true);  // dk += dS^T q
    }
    for (int64_t rb = 0; rb < rows; rb += 4)  // dq += dS k
      mk4(g.dS + rb * kTile, kTile, g.K + j0 * Dp, Dp, row_keys(a, d, q0 + rb, j0), g.dQ + (q0 + rb) * Dp, Dp, nvd,
          true);
  }
  const int64_t j1 = imin(d.T, j0 + kTile);
  write_grad_rows(a, d, g.dK, b, h, 1, j0, j1);
  write_grad_rows(a, d, g.dV, b, h, 2, j0, j1);
}

void backward_head(const AttentionKernelArgs& a, const Dims& d, int64_t b, int64_t h, float* w) {
#if defined(__AVX512BF16__)
  if (a.bf16) return backward_head_bf16(a, d, b, h, w);
#endif
  const int64_t Tp = round_up(d.T, kTile), Dp = d.Dp;
  const BackwardWork g = backward_work(d, Tp, w);
  const float* head = a.qkv + b * d.T * d.ld + h * d.D;
  const float* dy = a.dy + b * d.T * d.C + h * d.D;
  copy_rows(head, d.ld, d.T, d.D, Tp, Dp, a.bf16, g.Q);
  copy_rows(head + d.C, d.ld, d.T, d.D, Tp, Dp, a.bf16, g.K);
  copy_rows(dy, d.C, d.T, d.D, Tp, Dp, a.bf16, g.dY);
  transpose_into(head + d.C, d.ld, d.T, d.D, a.bf16, g.Kt, Tp);
  transpose_into(head + 2 * d.C, d.ld, d.T, d.D, a.bf16, g.Vt, Tp);
  std::memset(g.dQ, 0, sizeof(float) * Tp * Dp);
  key_flags(a, b, Tp, g.kv);
  row_dots(a, d, b, h, Tp, g.Di);
  for (int64_t j0 = 0; j0 < d.T; j0 += kTile) backward_key_tile(a, d, g, b, h, Tp, j0);
  write_grad_rows(a, d, g.dQ, b, h, 0, 0, d.T);
}

}  // namespace

void attention_backward(const AttentionKernelArgs& a) { for_each_head(a, true, backward_head); }

int64_t attention_work_floats(const AttentionKernelArgs& a, bool backward) {
  const Dims d = dims_of(a);
  const int64_t Tp = round_up(d.T, kTile);
  // Rounded to a cache line so the threads' workspaces share none.
  return round_up(backward ? backward_floats(d, Tp) : forward_floats(d, Tp), 16);
}

}  // namespace seqtrain::ST_ISA_NS
