// The CUDA backend's row-wise kernels (backend.h states their contracts; the reference backend
// is their oracle): cross-entropy fused with log-softmax, LayerNorm, the embedding gather and its
// scatter-add, dropout. CudaBackend's members (cuda_rows.cpp) check the arguments and call the
// launchers at the end of this file (cuda_rows_kernels.h says why the split).
//
// Every result is deterministic: sums are reduced in a fixed order by one block or one thread,
// never with float atomics. Targets and ids live in device memory, so the kernels validate them:
// a bad one lowers a flag to its row (the host turns it into the checks' error) and that row's
// memory is never touched.
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "backend/cuda/cuda_half.cuh"
#include "backend/cuda/cuda_kernel_util.cuh"
#include "backend/cuda/cuda_rows_kernels.h"
#include "backend/dropout_mask.h"

namespace seqtrain::cuda {
namespace {

constexpr int kRowThreads = 256;  // one block per row for the per-row reductions

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = ceil_div(n, threads);
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);  // grid-stride beyond
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy.

// The row's target, or ignore_index when it is ignored or out of range (the latter flagged).
__device__ int64_t checked_target(const int64_t* targets, int64_t row, int64_t C, int64_t ignore,
                                  unsigned long long* flag) {
  const int64_t t = targets[row];
  if (t == ignore) return ignore;
  if (t < 0 || t >= C) {
    if (threadIdx.x == 0) flag_bad_row(flag, row);
    return ignore;
  }
  return t;
}

// The row's max and log(sum exp(z - max)), the sum in double as the CPU's and the reference's
// (the loss is logged and held to double arithmetic).
struct RowLse {
  float max;
  double log_sum;
};
__device__ RowLse row_lse(const float* z, int64_t C, float* fshared, double* dshared) {
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = fmaxf(m, z[j]);
  m = block_reduce(m, MaxOp{}, fshared);
  double s = 0;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += exp(static_cast<double>(z[j]) - m);
  s = block_reduce(s, SumOp{}, dshared);
  return {m, log(s)};
}

// Per counted row: its loss (max - z_t) + log_sum (no cancellation for a confident row, as the
// CPU), whether t is the first largest logit, and lse when asked. Ignored rows record zeros.
__global__ void cross_entropy_rows(CrossEntropyLaunch a, double* row_loss, int* row_flags, unsigned long long* flag) {
  __shared__ float fshared[32];
  __shared__ double dshared[32];
  __shared__ int64_t ishared[32];
  const int64_t r = blockIdx.x;
  const int64_t t = checked_target(a.targets, r, a.classes, a.ignore_index, flag);
  if (t == a.ignore_index) {
    if (threadIdx.x == 0) { row_loss[r] = 0; row_flags[r] = 0; }
    return;
  }
  const float* z = a.logits + r * a.classes;
  const RowLse row = row_lse(z, a.classes, fshared, dshared);
  int64_t first = a.classes;  // first index holding the max (std::max_element's tie rule)
  for (int64_t j = threadIdx.x; j < a.classes; j += blockDim.x)
    if (z[j] == row.max && j < first) first = j;
  first = block_reduce(first, MinOp{}, ishared);
  if (threadIdx.x == 0) {
    row_loss[r] = (static_cast<double>(row.max) - z[t]) + row.log_sum;
    row_flags[r] = 1 | (first == t ? 2 : 0);
    if (a.lse) a.lse[r] = static_cast<float>(row.max + row.log_sum);
  }
}

// One block adds the rows' results: thread k takes rows k, k + blockDim, ... in order, then the
// block reduction; a fixed order for a fixed blockDim.
__global__ void cross_entropy_total(const double* row_loss, const int* row_flags, int64_t rows,
                                    CrossEntropyResult* out) {
  __shared__ double dshared[32];
  __shared__ long long ishared[32];
  double loss = 0;
  long long count = 0, correct = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss += row_loss[r];
    count += row_flags[r] & 1;
    correct += (row_flags[r] >> 1) & 1;
  }
  loss = block_reduce(loss, SumOp{}, dshared);
  count = block_reduce(count, SumOp{}, ishared);
  correct = block_reduce(correct, SumOp{}, ishared);
  if (threadIdx.x == 0) {
    out->loss = loss;
    out->count = count;
    out->correct = correct;
  }
}

// dz = scale * (e^(z - lse) - onehot(t)), ignored rows 0. Without a saved lse, z - lse is taken
// as (z - max) - log_sum, as the CPU does (a float lse of large logits would lose precision).
__global__ void cross_entropy_grad(CrossEntropyLaunch a, float scale, float* dlogits, unsigned long long* flag) {
  __shared__ float fshared[32];
  __shared__ double dshared[32];
  const int64_t r = blockIdx.x, C = a.classes;
  float* g = dlogits + r * C;
  const int64_t t = checked_target(a.targets, r, C, a.ignore_index, flag);
  if (t == a.ignore_index) {
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) g[j] = 0.f;
    return;
  }
  const float* z = a.logits + r * C;
  float shift = 0.f, lse = 0.f;
  if (a.lse) {
    lse = a.lse[r];
  } else {
    const RowLse row = row_lse(z, C, fshared, dshared);
    shift = row.max;
    lse = static_cast<float>(row.log_sum);
  }
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
    const float v = expf((z[j] - shift) - lse) * scale;
    g[j] = j == t ? v - scale : v;
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm.

constexpr int64_t kLayerNormBlockRows = 64;  // rows per partial column sum in backward

// The CPU's corrected two-pass moments in float (backend/cpu/kernels/layer_norm.cpp), then y.
// kOut: y as f32 (0), or rounded to bf16 (1) / fp16 (2) as it is written (cuda_half.cuh).
template <int kOut>
__global__ void layer_norm_rows(LayerNormLaunch a, void* y) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x, C = a.channels;
  const float* x = a.x + r * C;
  const float inv_c = 1.f / static_cast<float>(C);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
  const float mu0 = block_reduce(s, SumOp{}, shared) * inv_c;
  float s1 = 0.f, s2 = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = x[c] - mu0;
    s1 += d;
    s2 += d * d;
  }
  const float md = block_reduce(s1, SumOp{}, shared) * inv_c;
  const float var = block_reduce(s2, SumOp{}, shared) * inv_c - md * md;
  const float mu = mu0 + md, rs = 1.f / sqrtf(fmaxf(var, 0.f) + a.eps);
  if (threadIdx.x == 0) { a.mean[r] = mu; a.rstd[r] = rs; }
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = (x[c] - mu) * rs * a.weight[c];
    store_as<kOut>(y, r * C + c, a.bias ? v + a.bias[c] : v);
  }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), one block per row.
__global__ void layer_norm_dx(LayerNormLaunch a, const float* dy, float* dx) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x, C = a.channels;
  const float* x = a.x + r * C;
  const float* g = dy + r * C;
  const float mu = a.mean[r], rs = a.rstd[r];
  float m1 = 0.f, m2 = 0.f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (x[c] - mu) * rs, dxhat = g[c] * a.weight[c];
    m1 += dxhat;
    m2 += dxhat * xhat;
  }
  const float inv_c = 1.f / static_cast<float>(C);
  const float mean1 = block_reduce(m1, SumOp{}, shared) * inv_c;
  const float mean2 = block_reduce(m2, SumOp{}, shared) * inv_c;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (x[c] - mu) * rs;
    dx[r * C + c] = (g[c] * a.weight[c] - mean1 - xhat * mean2) * rs;
  }
}

// partial[blk][c] = sums over the block's rows, in row order, of dy * xhat and of dy; one thread
// per (column, row block). partials: [blocks][2][C].
__global__ void layer_norm_column_partials(LayerNormLaunch a, const float* dy, float* partials) {
  const int64_t C = a.channels, c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const int64_t blk = blockIdx.y, r0 = blk * kLayerNormBlockRows;
  const int64_t r1 = r0 + kLayerNormBlockRows < a.rows ? r0 + kLayerNormBlockRows : a.rows;
  float sw = 0.f, sb = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = dy[r * C + c];
    sw += g * ((a.x[r * C + c] - a.mean[r]) * a.rstd[r]);
    sb += g;
  }
  partials[(blk * 2) * C + c] = sw;
  partials[(blk * 2 + 1) * C + c] = sb;
}

// dweight[c] += the blocks' partials in block order; dbias likewise when given.
__global__ void layer_norm_column_totals(const float* partials, int64_t blocks, int64_t C, float* dweight,
                                         float* dbias) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  float sw = 0.f, sb = 0.f;
  for (int64_t b = 0; b < blocks; ++b) {
    sw += partials[(b * 2) * C + c];
    sb += partials[(b * 2 + 1) * C + c];
  }
  dweight[c] += sw;
  if (dbias) dbias[c] += sb;
}

// ---------------------------------------------------------------------------------------------
// Embedding.

__global__ void embedding_gather(EmbeddingLaunch a, const float* table, float* y, bool accumulate,
                                 unsigned long long* flag) {
  const int64_t n = a.count * a.dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / a.dim, j = e % a.dim, id = a.ids[i];
    if (id < 0 || id >= a.rows) {
      if (j == 0) flag_bad_row(flag, i);
      continue;
    }
    const float v = table[id * a.dim + j];
    y[e] = accumulate ? y[e] + v : v;
  }
}

// Deterministic scatter-add without atomics or a sort: thread (column j, lane p of kIdLanes)
// walks every id in the order of i and adds the ones with id % kIdLanes == p. Each (id, j) cell
// belongs to exactly one thread, which adds its repeated ids in order of i (as one CPU thread
// would); the id lanes only give the GPU more threads than there are columns.
constexpr int kIdLanes = 16;
__global__ void embedding_scatter_add(EmbeddingLaunch a, const float* dy, float* dtable, unsigned long long* flag) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= a.dim) return;
  const int64_t lane = blockIdx.y;
  for (int64_t i = 0; i < a.count; ++i) {
    const int64_t id = a.ids[i];
    if (id < 0 || id >= a.rows) {
      if (j == 0 && lane == 0) flag_bad_row(flag, i);
      continue;
    }
    if (id % kIdLanes != lane) continue;
    dtable[id * a.dim + j] += dy[i * a.dim + j];
  }
}

// The same sums for a small table (rows <= kListRowsMax: a GPT's vocabulary or positions), in
// two passes. First one block per row r lists, in ascending order, the positions i whose id is
// r (a warp ballot per 32 ids, the warps' counts in shared memory give each hit its place).
// Then thread (r, column j) starts from the table's value and adds dy[i][j] for the listed i in
// that order: the same additions in the same order as above and as the CPU (the same bits),
// with each thread reading only its row's ids. Walking all ids per thread instead (as the lanes
// kernel does) took 1.3 ms per call at the GPT's 16384 ids on an H100.
constexpr int64_t kListRowsMax = 1024;
constexpr int64_t kListIntsMax = int64_t{1} << 26;  // rows * count: 256 MiB of positions at most
constexpr int kListThreads = 1024;
__global__ void embedding_row_lists(EmbeddingLaunch a, int* lists, int* counts, unsigned long long* flag) {
  __shared__ int warp_hits[kListThreads / 32];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int* out = lists + r * a.count;
  int total = 0;
  for (int64_t base = 0; base < a.count; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const int64_t id = i < a.count ? a.ids[i] : -1;
    if (r == 0 && i < a.count && (id < 0 || id >= a.rows)) flag_bad_row(flag, i);
    const bool hit = id == r;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_hits[warp] = __popc(mask);
    __syncthreads();
    int before = 0, chunk = 0;
    for (int w = 0; w < warps; ++w) {
      before += w < warp ? warp_hits[w] : 0;
      chunk += warp_hits[w];
    }
    if (hit) out[total + before + __popc(mask & ((1u << lane) - 1u))] = static_cast<int>(i);
    total += chunk;
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[r] = total;
}

__global__ void embedding_sum_lists(EmbeddingLaunch a, const int* lists, const int* counts, const float* dy,
                                    float* dtable) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t r = blockIdx.y;
  if (j >= a.dim) return;
  const int n = counts[r];
  const int* list = lists + r * a.count;
  float acc = dtable[r * a.dim + j];
#pragma unroll 8
  for (int k = 0; k < n; ++k) acc += dy[static_cast<int64_t>(list[k]) * a.dim + j];
  dtable[r * a.dim + j] = acc;
}

bool uses_lists(const EmbeddingLaunch& a) {
  return a.rows <= kListRowsMax && a.rows * a.count <= kListIntsMax && a.count <= INT32_MAX;
}

// ---------------------------------------------------------------------------------------------
// Dropout: the mask of backend/dropout_mask.h, the keep threshold and scale computed once on the
// host as the CPU kernel does.

__global__ void dropout_map(const float* x, float* y, int64_t n, DropoutSeed mask_seed, int64_t first,
                            uint32_t threshold, float scale) {
  const uint64_t seed = resolve_seed(mask_seed);  // a captured step's: read as the kernel runs
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t g = first + i;  // the element's index in the mask (a shard's global position)
    const bool keep = attention_bits(dropout_block_key(seed, g / kDropoutBlock), g % kDropoutBlock) >= threshold;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

}  // namespace

size_t cross_entropy_forward_scratch(int64_t rows) {
  return sizeof(CrossEntropyResult) + (sizeof(double) + sizeof(int)) * static_cast<size_t>(rows);
}

cudaError_t launch_cross_entropy_forward(const CrossEntropyLaunch& a, void* scratch, cudaStream_t s) {
  auto* result = static_cast<CrossEntropyResult*>(scratch);
  auto* row_loss = reinterpret_cast<double*>(result + 1);
  auto* row_flags = reinterpret_cast<int*>(row_loss + a.rows);
  cudaError_t e = cudaMemsetAsync(&result->bad_row, 0xff, sizeof result->bad_row, s);
  if (e != cudaSuccess) return e;
  cross_entropy_rows<<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, row_loss, row_flags, &result->bad_row);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  cross_entropy_total<<<1, 1024, 0, s>>>(row_loss, row_flags, a.rows, result);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_backward(const CrossEntropyLaunch& a, float scale, float* dlogits,
                                          unsigned long long* flag, cudaStream_t s) {
  const cudaError_t e = cudaMemsetAsync(flag, 0xff, sizeof *flag, s);
  if (e != cudaSuccess) return e;
  cross_entropy_grad<<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, scale, dlogits, flag);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm_forward(const LayerNormLaunch& a, float* y, cudaStream_t s) {
  layer_norm_rows<0><<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, y);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm_forward_half(const LayerNormLaunch& a, bool bf16, void* y, cudaStream_t s) {
  if (bf16) layer_norm_rows<1><<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, y);
  else layer_norm_rows<2><<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, y);
  return cudaGetLastError();
}

size_t layer_norm_backward_scratch(int64_t rows, int64_t channels) {
  return sizeof(float) * 2 * static_cast<size_t>(ceil_div(rows, kLayerNormBlockRows) * channels);
}

cudaError_t launch_layer_norm_backward(const LayerNormLaunch& a, const float* dy, float* dx, float* dweight,
                                       float* dbias, void* scratch, cudaStream_t s) {
  const int64_t C = a.channels, blocks = ceil_div(a.rows, kLayerNormBlockRows);
  auto* partials = static_cast<float*>(scratch);
  layer_norm_dx<<<static_cast<unsigned>(a.rows), kRowThreads, 0, s>>>(a, dy, dx);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const unsigned col_blocks = static_cast<unsigned>(ceil_div(C, 128));
  layer_norm_column_partials<<<dim3(col_blocks, static_cast<unsigned>(blocks)), 128, 0, s>>>(a, dy, partials);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  layer_norm_column_totals<<<col_blocks, 128, 0, s>>>(partials, blocks, C, dweight, dbias);
  return cudaGetLastError();
}

cudaError_t launch_embedding_forward(const EmbeddingLaunch& a, const float* table, float* y, bool accumulate,
                                     unsigned long long* flag, cudaStream_t s) {
  const cudaError_t e = cudaMemsetAsync(flag, 0xff, sizeof *flag, s);
  if (e != cudaSuccess) return e;
  embedding_gather<<<grid_for(a.count * a.dim, 256), 256, 0, s>>>(a, table, y, accumulate, flag);
  return cudaGetLastError();
}

size_t embedding_backward_scratch(const EmbeddingLaunch& a) {
  const size_t flag = 256;  // the flag, padded so the ints after it stay aligned
  return uses_lists(a) ? flag + sizeof(int) * static_cast<size_t>(a.rows * (a.count + 1)) : flag;
}

cudaError_t launch_embedding_backward(const EmbeddingLaunch& a, const float* dy, float* dtable, void* scratch,
                                      cudaStream_t s) {
  auto* flag = static_cast<unsigned long long*>(scratch);
  const cudaError_t e = cudaMemsetAsync(flag, 0xff, sizeof *flag, s);
  if (e != cudaSuccess) return e;
  if (uses_lists(a)) {
    int* counts = reinterpret_cast<int*>(static_cast<char*>(scratch) + 256);
    int* lists = counts + a.rows;
    embedding_row_lists<<<static_cast<unsigned>(a.rows), kListThreads, 0, s>>>(a, lists, counts, flag);
    const dim3 grid(static_cast<unsigned>(ceil_div(a.dim, 128)), static_cast<unsigned>(a.rows));
    embedding_sum_lists<<<grid, 128, 0, s>>>(a, lists, counts, dy, dtable);
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(a.dim, 128)), kIdLanes);
  embedding_scatter_add<<<grid, 128, 0, s>>>(a, dy, dtable, flag);
  return cudaGetLastError();
}

cudaError_t launch_dropout(const float* x, float* y, int64_t n, DropoutSeed seed, int64_t first, uint32_t threshold,
                           float scale, cudaStream_t s) {
  dropout_map<<<grid_for(n, 256), 256, 0, s>>>(x, y, n, seed, first, threshold, scale);
  return cudaGetLastError();
}

}  // namespace seqtrain::cuda
