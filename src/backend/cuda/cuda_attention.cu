// Self-attention on the GPU in FlashAttention-2's scheme (backend.h's AttentionArgs states the
// contract; backend/reference's naive loops are the oracle, backend/cpu/kernels/attention.cpp the
// same algorithm on the CPU). Tiles of kTile queries x kTile keys in shared memory, an online
// softmax per query row, the T x T score matrix never stored:
//   forward    one block per (query tile, b, h) walks the key tiles (causal: only those at or
//              below the diagonal), rescaling its output accumulator as the row max grows; it
//              writes y and each row's logsumexp.
//   backward   D_i = rowsum(dy_i * y_i) first; then one block per (key tile, b, h) walks the
//              query tiles and accumulates that tile's dk and dv, and one block per (query tile,
//              b, h) walks the key tiles and accumulates dq. Both recompute the probabilities
//              from the saved lse. Each output element has exactly one owner thread adding in a
//              fixed order: no atomics, bitwise reproducible.
// Masks: causal order, the key-padding mask (nonzero = padding key), rows past T in the last
// tile. A row with no visible key ends with sum 0: y zeros, lse -inf, and in backward every one
// of its entries is masked, so its gradients are zero (backend.h's choice).
// Dropout: attention_dropout.h's mask of (seed, b, h, i, j), kept entries scaled by 1/(1 - p);
// the softmax's normalizer sums the probabilities before dropout, as the CPU's softmax_row.
// bf16: q, k, v, dy, the dropped probabilities and dS are rounded to bf16 where they enter a
// product (the CPU kernel's rounding points); products accumulate, and the softmax runs, in fp32.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/attention_dropout.h"
#include "backend/cuda/cuda_attention_kernels.h"
#include "backend/cuda/cuda_kernel_util.cuh"

namespace seqtrain::cuda {
namespace {

constexpr int kTile = 32;      // queries per tile and keys per tile
constexpr int kThreads = 128;  // per block
constexpr int kTileLd = kTile + 1;  // row stride of the score tiles (no bank conflicts on columns)

// One (b, h) head's geometry. Rows of q, k, v have stride 3C in qkv; y and dy rows stride C.
struct Head {
  int64_t b, h, T, C, D;
  int ld;       // row stride of a q/k/v/accumulator tile in shared memory: D made odd
  float scale;  // 1 / sqrt(D), as the CPU kernel
};
__device__ Head head_of(const AttentionLaunch& a, int64_t bh) {
  Head hd;
  hd.b = bh / a.H;
  hd.h = bh % a.H;
  hd.T = a.T;
  hd.C = a.C;
  hd.D = a.C / a.H;
  hd.ld = static_cast<int>(hd.D | 1);
  hd.scale = 1.f / sqrtf(static_cast<float>(hd.D));
  return hd;
}

// Shared memory of a block, carved from the dynamic allocation: row tiles of kTile x ld floats
// (q, k, v, dy, two accumulators), two score tiles, and per-row / per-key values.
struct Tiles {
  float *Q, *K, *V, *dY, *acc1, *acc2;    // [kTile][ld]
  float *S, *dS;                          // [kTile][kTileLd]
  float *m, *l, *alpha, *lse, *Di;        // [kTile] per query row
  float *key_ok;                          // [kTile] 1 where key j0 + c is real and not padding
  unsigned long long* row_key;            // [kTile] the rows' dropout keys
};
constexpr int kRowTiles = 6, kScoreTiles = 2, kRowVectors = 6;
size_t tiles_bytes(int64_t D) {
  const int64_t ld = D | 1;
  return sizeof(unsigned long long) * kTile +
         sizeof(float) * (kRowTiles * kTile * ld + kScoreTiles * kTile * kTileLd + kRowVectors * kTile);
}
__device__ Tiles carve_tiles(int ld) {
  extern __shared__ unsigned long long smem[];
  Tiles t;
  t.row_key = smem;
  float* p = reinterpret_cast<float*>(smem + kTile);
  float** rows[] = {&t.Q, &t.K, &t.V, &t.dY, &t.acc1, &t.acc2};
  for (float** r : rows) { *r = p; p += kTile * ld; }
  t.S = p; p += kTile * kTileLd;
  t.dS = p; p += kTile * kTileLd;
  float** vecs[] = {&t.m, &t.l, &t.alpha, &t.lse, &t.Di, &t.key_ok};
  for (float** v : vecs) { *v = p; p += kTile; }
  return t;
}

// Rows [r0, r0 + kTile) x D of a matrix (row stride src_ld) into a tile; rows past T are zero.
__device__ void load_rows(float* tile, int ld, const float* src, int64_t src_ld, int64_t r0, const Head& hd,
                          bool bf16) {
  for (int idx = threadIdx.x; idx < kTile * hd.D; idx += blockDim.x) {
    const int r = idx / static_cast<int>(hd.D), d = idx % static_cast<int>(hd.D);
    float v = r0 + r < hd.T ? src[(r0 + r) * src_ld + d] : 0.f;
    tile[r * ld + d] = bf16 ? round_bf16(v) : v;
  }
}

__device__ void fill(float* p, int n, float v) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = v;
}

// The key tile [j0, j0 + kTile) of head hd: k and v rows and the per-key flags.
__device__ void load_keys(const AttentionLaunch& a, const Head& hd, const Tiles& t, int64_t j0) {
  const float* base = a.qkv + hd.b * hd.T * 3 * hd.C + hd.h * hd.D;
  load_rows(t.K, hd.ld, base + hd.C, 3 * hd.C, j0, hd, a.bf16);
  load_rows(t.V, hd.ld, base + 2 * hd.C, 3 * hd.C, j0, hd, a.bf16);
  for (int c = threadIdx.x; c < kTile; c += blockDim.x) {
    const int64_t j = j0 + c;
    const bool pad = a.key_padding_mask && j < hd.T && a.key_padding_mask[hd.b * hd.T + j];
    t.key_ok[c] = j < hd.T && !pad ? 1.f : 0.f;
  }
}

// Whether query q0 + r may attend to key j0 + c (the key flags loaded for this tile).
__device__ bool visible(const AttentionLaunch& a, const Head& hd, const Tiles& t, int64_t q0, int r, int64_t j0,
                        int c) {
  const int64_t i = q0 + r, j = j0 + c;
  return i < hd.T && t.key_ok[c] != 0.f && !(a.causal && j > i);
}

// The dropout factor of entry (row r, key j): keep_scale where kept, 0 where dropped.
__device__ float keep_factor(const AttentionLaunch& a, const Tiles& t, int r, int64_t j) {
  return attention_bits(t.row_key[r], j) >= a.keep_threshold ? a.keep_scale : 0.f;
}

__device__ float dot(const float* x, const float* y, int64_t D) {
  float s = 0.f;
  for (int64_t d = 0; d < D; ++d) s += x[d] * y[d];
  return s;
}

// ---------------------------------------------------------------------------------------------
// Forward.

// Row r of the score tile S through the online softmax (one thread per row): S becomes the
// (dropped, rounded) probabilities; m, l and alpha (the output's rescale factor) are updated.
__device__ void softmax_row(const AttentionLaunch& a, const Tiles& t, int r, int64_t j0) {
  float* s = t.S + r * kTileLd;
  float mx = -INFINITY;
  for (int c = 0; c < kTile; ++c) mx = fmaxf(mx, s[c]);  // masked entries hold -inf
  const float m_old = t.m[r], m_new = fmaxf(m_old, mx);
  // While the row has seen no key at all both are -inf (and its sums are still 0): alpha 1.
  const float alpha = m_new == -INFINITY ? 1.f : expf(m_old - m_new);
  float sum = 0.f;
  for (int c = 0; c < kTile; ++c) {
    float e = s[c] == -INFINITY ? 0.f : expf(s[c] - m_new);
    sum += e;  // the normalizer sums the probabilities before dropout
    if (a.dropout) e *= keep_factor(a, t, r, j0 + c);
    s[c] = a.bf16 ? round_bf16(e) : e;
  }
  t.l[r] = t.l[r] * alpha + sum;
  t.m[r] = m_new;
  t.alpha[r] = alpha;
}

__global__ void attention_forward_kernel(AttentionLaunch a) {
  const Head hd = head_of(a, blockIdx.y);
  const Tiles t = carve_tiles(hd.ld);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const float* base = a.qkv + hd.b * hd.T * 3 * hd.C + hd.h * hd.D;
  const int D = static_cast<int>(hd.D);
  float* O = t.acc1;
  load_rows(t.Q, hd.ld, base, 3 * hd.C, q0, hd, a.bf16);
  fill(O, kTile * hd.ld, 0.f);
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    t.m[r] = -INFINITY;
    t.l[r] = 0.f;
    if (a.dropout) t.row_key[r] = attention_row_key(resolve_seed(a.seed), hd.b + a.batch_offset, hd.h, q0 + r);
  }
  // Causal: key tiles up to the tile's last query; the ones above the diagonal are never read.
  const int64_t kend = a.causal && q0 + kTile < hd.T ? q0 + kTile : hd.T;
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    __syncthreads();  // the previous tile's K, V and S are no longer read
    load_keys(a, hd, t, j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * kTile; idx += blockDim.x) {
      const int r = idx / kTile, c = idx % kTile;
      t.S[r * kTileLd + c] =
          visible(a, hd, t, q0, r, j0, c) ? dot(t.Q + r * hd.ld, t.K + c * hd.ld, hd.D) * hd.scale : -INFINITY;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) softmax_row(a, t, r, j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
      const int r = idx / D, d = idx % D;
      const float* p = t.S + r * kTileLd;
      float acc = O[r * hd.ld + d] * t.alpha[r];
      for (int c = 0; c < kTile; ++c) acc += p[c] * t.V[c * hd.ld + d];
      O[r * hd.ld + d] = acc;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int64_t i = q0 + r;
    if (i >= hd.T) continue;
    const float l = t.l[r], inv = l > 0.f ? 1.f / l : 0.f;  // l = 0: the row saw no key (zeros)
    a.y[(hd.b * hd.T + i) * hd.C + hd.h * hd.D + d] = O[r * hd.ld + d] * inv;
  }
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    const int64_t i = q0 + r;
    if (i < hd.T) a.lse[blockIdx.y * hd.T + i] = t.l[r] > 0.f ? t.m[r] + logf(t.l[r]) : -INFINITY;
  }
}

// ---------------------------------------------------------------------------------------------
// Backward.

// D_i = rowsum(dy_i * y_i) in fp32 from the unrounded values (the CPU's), one thread per row.
__global__ void attention_row_dots(AttentionLaunch a, const float* dy, float* Di) {
  const int64_t D = a.C / a.H, rows = a.B * a.H * a.T;
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < rows;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = n % a.T, bh = n / a.T, b = bh / a.H, h = bh % a.H;
    const int64_t off = (b * a.T + i) * a.C + h * D;
    float s = 0.f;
    for (int64_t d = 0; d < D; ++d) s += dy[off + d] * a.y[off + d];
    Di[n] = s;
  }
}

// The query tile's per-row values: lse, D_i and the dropout keys (rows past T get 0s; every one
// of their entries is masked anyway).
__device__ void load_row_values(const AttentionLaunch& a, const Head& hd, const Tiles& t, const float* Di,
                                int64_t q0) {
  const int64_t bh = hd.b * a.H + hd.h;
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    const int64_t i = q0 + r;
    t.lse[r] = i < hd.T ? a.lse[bh * hd.T + i] : 0.f;
    t.Di[r] = i < hd.T ? Di[bh * hd.T + i] : 0.f;
    if (a.dropout) t.row_key[r] = attention_row_key(resolve_seed(a.seed), hd.b + a.batch_offset, hd.h, i);
  }
}

// The (query tile q0 x key tile j0) block of P (dropped, rounded: what multiplies dy) into S and
// of dS = p * (dP - D_i) * scale (rounded) into dS, p recomputed from lse; 0 where masked.
__device__ void probability_tiles(const AttentionLaunch& a, const Head& hd, const Tiles& t, int64_t q0, int64_t j0) {
  for (int idx = threadIdx.x; idx < kTile * kTile; idx += blockDim.x) {
    const int r = idx / kTile, c = idx % kTile;
    float pd = 0.f, ds = 0.f;
    if (visible(a, hd, t, q0, r, j0, c)) {
      const float p = expf(dot(t.Q + r * hd.ld, t.K + c * hd.ld, hd.D) * hd.scale - t.lse[r]);
      float dp = dot(t.dY + r * hd.ld, t.V + c * hd.ld, hd.D);
      pd = p;
      if (a.dropout) {
        const float kf = keep_factor(a, t, r, j0 + c);
        dp *= kf;
        pd *= kf;
      }
      ds = p * (dp - t.Di[r]) * hd.scale;
      if (a.bf16) { pd = round_bf16(pd); ds = round_bf16(ds); }
    }
    t.S[r * kTileLd + c] = pd;
    t.dS[r * kTileLd + c] = ds;
  }
}

// A tile's gradient rows [r0, r0 + kTile) (shared memory, row stride hd.ld) into column block
// `part` (0 q, 1 k, 2 v) of the head's dqkv rows; rows past T are padding and not written.
__device__ void store_grad_tile(const Head& hd, const float* tile, int64_t r0, int part, float* dqkv) {
  const int D = static_cast<int>(hd.D);
  float* out = dqkv + hd.b * hd.T * 3 * hd.C + hd.h * hd.D + part * hd.C;
  for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    if (r0 + r < hd.T) out[(r0 + r) * 3 * hd.C + d] = tile[r * hd.ld + d];
  }
}

// The query side of backward's tiles for query tile q0: the q and dy rows and the rows' lse and
// D_i values.
__device__ void load_query_side(const AttentionLaunch& a, const Head& hd, const Tiles& t, const float* dy,
                                const float* Di, int64_t q0) {
  load_rows(t.Q, hd.ld, a.qkv + hd.b * hd.T * 3 * hd.C + hd.h * hd.D, 3 * hd.C, q0, hd, a.bf16);
  load_rows(t.dY, hd.ld, dy + hd.b * hd.T * hd.C + hd.h * hd.D, hd.C, q0, hd, a.bf16);
  load_row_values(a, hd, t, Di, q0);
}

// Key tile j0 of a head against every query tile at or below it (causal) or all of them: dv +=
// P^T dy and dk += dS^T q, each (key, column) element owned by one thread, query rows in order.
__global__ void attention_dkdv_kernel(AttentionLaunch a, const float* dy, const float* Di, float* dqkv) {
  const Head hd = head_of(a, blockIdx.y);
  const Tiles t = carve_tiles(hd.ld);
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int D = static_cast<int>(hd.D);
  float *dK = t.acc1, *dV = t.acc2;
  load_keys(a, hd, t, j0);
  fill(dK, kTile * hd.ld, 0.f);
  fill(dV, kTile * hd.ld, 0.f);
  for (int64_t q0 = a.causal ? j0 / kTile * kTile : 0; q0 < hd.T; q0 += kTile) {
    __syncthreads();  // the previous query tile is no longer read
    load_query_side(a, hd, t, dy, Di, q0);
    __syncthreads();
    probability_tiles(a, hd, t, q0, j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
      const int c = idx / D, d = idx % D;
      float dv = dV[c * hd.ld + d], dk = dK[c * hd.ld + d];
      for (int r = 0; r < kTile; ++r) {
        dv += t.S[r * kTileLd + c] * t.dY[r * hd.ld + d];
        dk += t.dS[r * kTileLd + c] * t.Q[r * hd.ld + d];
      }
      dV[c * hd.ld + d] = dv;
      dK[c * hd.ld + d] = dk;
    }
  }
  __syncthreads();
  store_grad_tile(hd, dK, j0, 1, dqkv);
  store_grad_tile(hd, dV, j0, 2, dqkv);
}

// Query tile q0 of a head against the key tiles it sees: dq += dS k, each (row, column) element
// owned by one thread, keys in order.
__global__ void attention_dq_kernel(AttentionLaunch a, const float* dy, const float* Di, float* dqkv) {
  const Head hd = head_of(a, blockIdx.y);
  const Tiles t = carve_tiles(hd.ld);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int D = static_cast<int>(hd.D);
  float* dQ = t.acc1;
  load_query_side(a, hd, t, dy, Di, q0);
  fill(dQ, kTile * hd.ld, 0.f);
  const int64_t kend = a.causal && q0 + kTile < hd.T ? q0 + kTile : hd.T;
  for (int64_t j0 = 0; j0 < kend; j0 += kTile) {
    __syncthreads();  // the previous key tile is no longer read
    load_keys(a, hd, t, j0);
    __syncthreads();
    probability_tiles(a, hd, t, q0, j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
      const int r = idx / D, d = idx % D;
      float acc = dQ[r * hd.ld + d];
      for (int c = 0; c < kTile; ++c) acc += t.dS[r * kTileLd + c] * t.K[c * hd.ld + d];
      dQ[r * hd.ld + d] = acc;
    }
  }
  __syncthreads();
  store_grad_tile(hd, dQ, q0, 0, dqkv);
}

// Launches `kernel` over (tiles of T, B * H) with the shared memory its head dimension needs
// (above the 48 KiB default, which needs the opt-in attribute).
template <class... Args>
cudaError_t launch_tiles(void (*kernel)(AttentionLaunch, Args...), const AttentionLaunch& a, cudaStream_t s,
                         Args... args) {
  const size_t bytes = tiles_bytes(a.C / a.H);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(ceil_div(a.T, kTile)), static_cast<unsigned>(a.B * a.H));
  kernel<<<grid, kThreads, bytes, s>>>(a, args...);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_attention_forward(const AttentionLaunch& a, cudaStream_t s) {
  return launch_tiles(attention_forward_kernel, a, s);
}

size_t attention_backward_scratch_floats(const AttentionLaunch& a) {
  return static_cast<size_t>(a.B * a.H * a.T);
}

cudaError_t launch_attention_backward(const AttentionLaunch& a, const float* dy, float* dqkv, float* scratch,
                                      cudaStream_t s) {
  float* Di = scratch;
  const int64_t rows = a.B * a.H * a.T;
  const int64_t blocks = ceil_div(rows, 256) < 65535 ? ceil_div(rows, 256) : 65535;
  attention_row_dots<<<static_cast<unsigned>(blocks), 256, 0, s>>>(a, dy, Di);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  if ((e = launch_tiles(attention_dkdv_kernel, a, s, dy, static_cast<const float*>(Di), dqkv)) != cudaSuccess)
    return e;
  return launch_tiles(attention_dq_kernel, a, s, dy, static_cast<const float*>(Di), dqkv);
}

}  // namespace seqtrain::cuda
