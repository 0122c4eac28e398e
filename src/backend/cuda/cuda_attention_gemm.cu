// The row kernels of the GEMM attention path: everything of backend.h's attention contract that
// is not a matrix product, around the cuBLASLt strided-batched GEMMs that CudaBackend runs between
// them (cuda_attention.cpp). The tile kernels of cuda_attention.cu keep every T x T value in
// shared memory and multiply on the CUDA cores in fp32; here the score matrices go through
// global scratch so that the products run on the tensor cores, and these kernels only read or
// write each score once or a few times (memory-bound, a small part of the step).
//
// The math, masks, dropout and bf16 rounding points are the tile kernels' (cuda_attention.cu's
// header says them), so either path meets the same tests:
//   forward   S = q k^T (GEMM), then per row: scale, the causal and key-padding masks, the max
//             and logsumexp (lse [B, H, T], row (b * H + h) * T + i), the probabilities
//             p = exp(s - lse) (normalized before dropout: the normalizer sums undropped p),
//             dropout's factor, rounded to bf16 when bf16; y = P v (GEMM).
//   backward  D_i = rowsum(dy_i * y_i) from the unrounded values; S and dP = dy v^T (GEMMs);
//             per entry p from S and lse, the dropped p (what multiplied v) and
//             dS = p * (dP * factor - D_i) * scale, both rounded when bf16 (the scale inside dS
//             before rounding, as the tile kernels); dv = P^T dy, dq = dS k, dk = dS^T q (GEMMs).
// A row with no visible key has lse -inf and all-zero P and dS rows: y 0, zero gradients.
// Reductions (row max, row sums) use warp shuffles in a fixed order: bitwise reproducible.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/attention_dropout.h"
#include "backend/cuda/cuda_attention_gemm_kernels.h"
#include "backend/cuda/cuda_kernel_util.cuh"

namespace seqtrain::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;  // rows per block in the one-warp-per-row kernels
constexpr unsigned kFullMask = 0xffffffffu;

// Operands are stored as float (fp32 calls) or as bf16 bits (bf16 calls): round_bf16 leaves the
// low 16 bits zero, so its high half is exactly the bf16 value the tile kernels multiply with.
__device__ inline void put(float* p, float x) { *p = x; }
__device__ inline void put(uint16_t* p, float x) { *p = static_cast<uint16_t>(__float_as_uint(round_bf16(x)) >> 16); }

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
// Butterfly order: every lane ends with the same bits (a + b == b + a at each step).
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

int blocks_for(int64_t work, int64_t per_block) {
  const int64_t b = ceil_div(work, per_block);
  return static_cast<int>(b < (int64_t{1} << 20) ? b : (int64_t{1} << 20));  // grid-stride beyond
}

// One score row's place: head bh = b * H + h, query i, and the keys it may see. Causal: [0, i];
// the key-padding mask is tested per key (visible()).
struct Row {
  int64_t n, bh, b, h, i, jend;
};
__device__ Row row_of(const AttentionCall& a, int64_t n) {
  Row r;
  r.n = n;
  r.bh = n / a.T;
  r.i = n % a.T;
  r.b = r.bh / a.H;
  r.h = r.bh % a.H;
  r.jend = a.causal && r.i + 1 < a.T ? r.i + 1 : a.T;
  return r;
}
__device__ inline bool visible(const AttentionCall& a, const Row& r, int64_t j) {
  return j < r.jend && !(a.key_padding_mask && a.key_padding_mask[r.b * a.T + j]);
}
__device__ inline float keep_factor(const AttentionCall& a, uint64_t row_key, int64_t j) {
  return attention_bits(row_key, j) >= a.keep_threshold ? a.keep_scale : 0.f;
}
__device__ inline float head_scale(const AttentionCall& a) {
  return 1.f / sqrtf(static_cast<float>(a.C / a.H));  // the tile kernels' head_of()
}

// Every (bh, t, d < Dp) of the three operands; d >= D are the zero padding columns.
template <class E>
__global__ void pack_qkv_kernel(AttentionCall a, AttentionGemmBuffers g) {
  const int64_t D = a.C / a.H, total = a.B * a.H * a.T * g.Dp;
  E* out[3] = {static_cast<E*>(g.q), static_cast<E*>(g.k), static_cast<E*>(g.v)};
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < total;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = n % g.Dp, row = n / g.Dp, t = row % a.T, bh = row / a.T, b = bh / a.H, h = bh % a.H;
    float x[3] = {0.f, 0.f, 0.f};
    if (d < D) {
      const float* src = a.qkv + (b * a.T + t) * 3 * a.C + h * D + d;
      for (int part = 0; part < 3; ++part) x[part] = src[part * a.C];
    }
    for (int part = 0; part < 3; ++part) put(out[part] + n, x[part]);
  }
}

// One warp per score row: max, logsumexp, then the dropped probabilities of every key < T.
template <class E>
__global__ void softmax_kernel(AttentionCall a, AttentionGemmBuffers g) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.B * a.H * a.T;
  const float scale = head_scale(a);
  for (int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; n < rows;
       n += static_cast<int64_t>(gridDim.x) * kWarps) {
    const Row r = row_of(a, n);
    const float* s = g.s + n * g.Tp;
    float m = -INFINITY;
    for (int64_t j = lane; j < r.jend; j += 32)
      if (visible(a, r, j)) m = fmaxf(m, s[j] * scale);
    m = warp_max(m);
    float l = 0.f;
    if (m != -INFINITY)  // else no key is visible: sum 0
      for (int64_t j = lane; j < r.jend; j += 32)
        if (visible(a, r, j)) l += expf(s[j] * scale - m);
    l = warp_sum(l);
    const float lse = l > 0.f ? m + logf(l) : -INFINITY;
    if (lane == 0) a.lse[n] = lse;
    const uint64_t key = a.dropout ? attention_row_key(resolve_seed(a.seed), r.b + a.batch_offset, r.h, r.i) : 0;
    E* p = static_cast<E*>(g.p) + n * g.Tp;
    for (int64_t j = lane; j < a.T; j += 32) {
      float v = 0.f;
      if (visible(a, r, j)) {
        v = expf(s[j] * scale - lse);
        if (a.dropout) v *= keep_factor(a, key, j);
      }
      put(p + j, v);
    }
  }
}

// y [B, T, C] in its own order (coalesced writes), each element read from its head's row.
__global__ void store_y_kernel(AttentionCall a, AttentionGemmBuffers g) {
  const int64_t D = a.C / a.H, total = a.B * a.T * a.C;
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < total;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = n % a.C, bt = n / a.C, b = bt / a.T, t = bt % a.T, h = c / D, d = c % D;
    a.y[n] = g.out[0][((b * a.H + h) * a.T + t) * g.Dp + d];
  }
}

// One warp per (bh, t) row: dy's row into g.dy and D_i = rowsum(dy * y) in fp32.
template <class E>
__global__ void pack_dy_kernel(AttentionCall a, const float* dy, AttentionGemmBuffers g) {
  const int lane = threadIdx.x % 32;
  const int64_t D = a.C / a.H, rows = a.B * a.H * a.T;
  for (int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; n < rows;
       n += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t t = n % a.T, bh = n / a.T, b = bh / a.H, h = bh % a.H;
    const int64_t off = (b * a.T + t) * a.C + h * D;
    E* out = static_cast<E*>(g.dy) + n * g.Dp;
    float sum = 0.f;
    for (int64_t d = lane; d < g.Dp; d += 32) {
      const float v = d < D ? dy[off + d] : 0.f;
      if (d < D) sum += v * a.y[off + d];
      put(out + d, v);
    }
    sum = warp_sum(sum);
    if (lane == 0) g.di[n] = sum;
  }
}

// One warp per score row: p recomputed from S and lse, then the dropped p and dS per key.
template <class E>
__global__ void score_grads_kernel(AttentionCall a, AttentionGemmBuffers g) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = a.B * a.H * a.T;
  const float scale = head_scale(a);
  for (int64_t n = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; n < rows;
       n += static_cast<int64_t>(gridDim.x) * kWarps) {
    const Row r = row_of(a, n);
    const float lse = a.lse[n], di = g.di[n];
    const uint64_t key = a.dropout ? attention_row_key(resolve_seed(a.seed), r.b + a.batch_offset, r.h, r.i) : 0;
    const float *s = g.s + n * g.Tp, *dp_row = g.dp + n * g.Tp;
    E* p_out = static_cast<E*>(g.p) + n * g.Tp;
    E* ds_out = static_cast<E*>(g.ds) + n * g.Tp;
    for (int64_t j = lane; j < a.T; j += 32) {
      float pd = 0.f, ds = 0.f;
      if (visible(a, r, j)) {
        const float p = expf(s[j] * scale - lse);
        float dp = dp_row[j];
        pd = p;
        if (a.dropout) {
          const float kf = keep_factor(a, key, j);
          dp *= kf;
          pd *= kf;
        }
        ds = p * (dp - di) * scale;
      }
      put(p_out + j, pd);
      put(ds_out + j, ds);
    }
  }
}

// dqkv [B, T, 3C] in its own order: every element (q, k and v columns of every row) written.
// One block per (b, t) row and 32-bit index arithmetic within it: a flat loop over the 19M
// elements with 64-bit divisions per element took 0.57 ms per call at the GPT shape on an H100.
__global__ void store_dqkv_kernel(AttentionCall a, AttentionGemmBuffers g, float* dqkv) {
  const int C = static_cast<int>(a.C), D = C / static_cast<int>(a.H), C3 = 3 * C;
  const int T = static_cast<int>(a.T), H = static_cast<int>(a.H);
  for (int64_t bt = blockIdx.x; bt < a.B * a.T; bt += gridDim.x) {
    const int64_t b = bt / T;
    const int t = static_cast<int>(bt - b * T);
    float* out = dqkv + bt * C3;
    for (int c3 = threadIdx.x; c3 < C3; c3 += blockDim.x) {
      const int part = c3 / C, c = c3 - part * C, h = c / D, d = c - h * D;
      out[c3] = g.out[part][((b * H + h) * T + t) * g.Dp + d];
    }
  }
}

// Calls launch(T{}) with T the operands' element type (uint16_t bf16 bits or float), then
// returns the launch's error.
template <typename Launch>
cudaError_t by_operand_type(const AttentionCall& a, Launch&& launch) {
  if (a.bf16)
    launch(uint16_t{});
  else
    launch(float{});
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_attention_gemm_pack_qkv(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s) {
  const int blocks = blocks_for(a.B * a.H * a.T * g.Dp, kThreads);
  return by_operand_type(a, [&](auto t) { pack_qkv_kernel<decltype(t)><<<blocks, kThreads, 0, s>>>(a, g); });
}

cudaError_t launch_attention_gemm_softmax(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s) {
  const int blocks = blocks_for(a.B * a.H * a.T, kWarps);
  return by_operand_type(a, [&](auto t) { softmax_kernel<decltype(t)><<<blocks, kThreads, 0, s>>>(a, g); });
}

cudaError_t launch_attention_gemm_store_y(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s) {
  store_y_kernel<<<blocks_for(a.B * a.T * a.C, kThreads), kThreads, 0, s>>>(a, g);
  return cudaGetLastError();
}

cudaError_t launch_attention_gemm_pack_dy(const AttentionCall& a, const float* dy, const AttentionGemmBuffers& g,
                                          cudaStream_t s) {
  const int blocks = blocks_for(a.B * a.H * a.T, kWarps);
  return by_operand_type(a, [&](auto t) { pack_dy_kernel<decltype(t)><<<blocks, kThreads, 0, s>>>(a, dy, g); });
}

cudaError_t launch_attention_gemm_score_grads(const AttentionCall& a, const AttentionGemmBuffers& g, cudaStream_t s) {
  const int blocks = blocks_for(a.B * a.H * a.T, kWarps);
  return by_operand_type(a, [&](auto t) { score_grads_kernel<decltype(t)><<<blocks, kThreads, 0, s>>>(a, g); });
}

cudaError_t launch_attention_gemm_store_dqkv(const AttentionCall& a, const AttentionGemmBuffers& g, float* dqkv,
                                             cudaStream_t s) {
  store_dqkv_kernel<<<static_cast<unsigned>(a.B * a.T < 65535 ? a.B * a.T : 65535), kThreads, 0, s>>>(a, g, dqkv);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
