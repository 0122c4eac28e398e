// Small device and host helpers shared by the CUDA backend's row and attention kernels: block
// reductions in a fixed order (so a sum is the same on every run, which float atomics would not
// give), bf16 rounding at exactly the CPU kernels' rounding points, and the "first bad index"
// flag that lets a kernel validate device-resident targets / ids and the host report the same
// error text as backend.cpp's host-side checks.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_rows_kernels.h"

namespace seqtrain::cuda {

// Round to nearest even at bf16 precision, kept as a float: the bit trick of the CPU's
// attention kernel (backend/cpu/kernels/attention.cpp round_bf16), so both give the same bits.
__device__ inline float round_bf16(float x) {
  uint32_t u = __float_as_uint(x);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return __uint_as_float(u);
}

inline int64_t ceil_div(int64_t n, int64_t m) { return (n + m - 1) / m; }

// Reductions over a whole block (blockDim.x a multiple of 32, at most 1024). `shared` holds 32
// values of T. The combination order depends only on blockDim.x, never on timing, so results
// are bitwise reproducible. Every thread gets the result.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* shared) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = shared[0];
  for (int w = 1; w < warps; ++w) v = op(v, shared[w]);
  return v;
}

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

// A kernel that meets an invalid target / id at row r lowers the flag (kNoBadRow when none) to r
// with atomicMin, so the host reports the first bad row whatever the launch order (an integer
// min is order-independent).
__device__ inline void flag_bad_row(unsigned long long* flag, int64_t row) {
  atomicMin(flag, static_cast<unsigned long long>(row));
}

}  // namespace seqtrain::cuda
