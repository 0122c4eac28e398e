// CudaBackend's self-attention: the argument checks and the mask's constants on the host, then
// one of two implementations on the stream (asynchronous: nothing comes back):
//   gemm   the products as cuBLASLt strided-batched GEMMs on the tensor cores, one batch entry
//          per (b, h), with the T x T scores materialized in scratch and the softmax, masks and
//          dropout in the row kernels of cuda_attention_gemm.cu. The default: the tile kernels
//          multiply on the CUDA cores in fp32 and took 34 of a 47 ms GPT step on an H100.
//   tiles  the FlashAttention-2 kernels of cuda_attention.cu (no T x T memory at all). Used when
//          the GEMM path's scratch would pass kGemmScratchLimit (long sequences), or when the
//          environment says SEQTRAIN_CUDA_ATTENTION=tiles.
// Both meet the same contract (backend.h's AttentionArgs; lse [B, H, T]; backward overwrites
// dqkv) with the same masks, dropout mask and bf16 rounding points, so forward and backward may
// even come from different paths. The choice is made per call from the sizes, for forward and
// backward alike (on backward's larger scratch), so a layer's two halves take the same path.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/cuda_attention_gemm_kernels.h"
#include "backend/cuda/cuda_attention_kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

// The GEMM path's largest scratch. At the GPT shape of the profile (B 64, H 6, T 256, D 64)
// backward needs about 0.4 GiB in bf16 and 0.5 GiB in fp32; the limit keeps the path from
// claiming device memory that grows with T^2 (T 4096 at B*H 32 would want 6 GiB).
constexpr size_t kGemmScratchLimit = size_t{2} << 30;

// Every region starts at a multiple of this: cuBLASLt's fastest kernels want 256-byte aligned
// operands, and the alignment is part of each cached plan's key.
constexpr size_t kRegionAlign = 256;

AttentionLaunch launch_args(const AttentionArgs& a) {
  check_attention_args(a);  // before the limits below read its sizes
  const int64_t D = a.channels / a.heads;
  // The tile kernels' limits, kept for both paths so that a call's validity never depends on
  // which one runs (the GEMM path would take larger heads).
  ST_CHECK(D <= kAttentionMaxHeadDim,
           "attention: head dimension {} (n_embd {} / n_head {}) is above the CUDA kernels' limit of {}", D,
           a.channels, a.heads, kAttentionMaxHeadDim);
  ST_CHECK(a.batch * a.heads <= 65535 && a.seq <= INT32_MAX,
           "attention: batch {} x n_head {} is more than the CUDA kernels' grid takes (65535)", a.batch, a.heads);
  return attention_call(a);
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The GEMM path's scratch regions (cuda_attention_gemm_kernels.h), carved in order from `base`;
// with base null only the sizes are worked out. Returns the bytes the whole call needs. Every
// region has its own memory: backward holds q, k, v, dy, S, dP, P, dS, D_i and dq, dk, dv at once.
size_t carve(const AttentionLaunch& l, bool backward, char* base, AttentionGemmBuffers& g) {
  const int64_t BH = l.B * l.H, D = l.C / l.H;
  g.Dp = round_up(D, kAttentionGemmPad);
  g.Tp = round_up(l.T, kAttentionGemmPad);
  const size_t operand = l.bf16 ? 2 : 4;
  const auto rows = static_cast<size_t>(BH * l.T * g.Dp), scores = static_cast<size_t>(BH * l.T * g.Tp);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    char* p = base ? base + at : nullptr;
    at += (bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
    return p;
  };
  auto take_f32 = [&](size_t n) { return reinterpret_cast<float*>(take(n * sizeof(float))); };
  g.q = take(rows * operand);
  g.k = take(rows * operand);
  g.v = take(rows * operand);
  g.s = take_f32(scores);
  g.p = take(scores * operand);
  if (!backward) {
    g.out[0] = take_f32(rows);
    return at;
  }
  g.dy = take(rows * operand);
  g.dp = take_f32(scores);
  g.ds = take(scores * operand);
  g.di = take_f32(static_cast<size_t>(BH * l.T));
  for (float*& o : g.out) o = take_f32(rows);
  return at;
}

// SEQTRAIN_CUDA_ATTENTION, read at every call (a getenv is nothing next to the op, and the tests
// switch paths by setting it): unset, empty or "gemm" = the GEMM path where its scratch fits,
// "tiles" = always the tile kernels.
bool tiles_forced() {
  const char* env = std::getenv("SEQTRAIN_CUDA_ATTENTION");
  const std::string_view v = env ? env : "";
  ST_CHECK(v.empty() || v == "gemm" || v == "tiles",
           "SEQTRAIN_CUDA_ATTENTION is '{}': it takes 'gemm' (the default) or 'tiles'", v);
  return v == "tiles";
}

bool use_gemm(const AttentionLaunch& l) {
  if (tiles_forced()) return false;
  // T above 2^16 needs far more than the limit whatever B * H is; checked first so that the
  // size arithmetic below cannot overflow (B * H <= 65535 is launch_args' check).
  if (l.T > 65536) return false;
  AttentionGemmBuffers sizes;
  return carve(l, true, nullptr, sizes) <= kGemmScratchLimit;
}

}  // namespace

void CudaBackend::attention_forward(const AttentionArgs& a) {
  const AttentionLaunch l = launch_args(a);
  if (use_gemm(l)) {
    attention_forward_gemm(l);
    return;
  }
  ST_CUDA(launch_attention_forward(l, stream_));
}

void CudaBackend::attention_backward(const AttentionArgs& a, const float* dy, float* dqkv) {
  const AttentionLaunch l = launch_args(a);
  ST_CHECK(dy && dqkv, "attention backward: dy and dqkv must be given (null pointer)");
  if (use_gemm(l)) {
    attention_backward_gemm(l, dy, dqkv);
    return;
  }
  auto* Di = static_cast<float*>(scratch(sizeof(float) * attention_backward_scratch_floats(l)));
  ST_CUDA(launch_attention_backward(l, dy, dqkv, Di, stream_));
}

// Row-major per head: S [T, T] = q [T, Dp] k^T, y [T, Dp] = P [T, T] v. The padding columns of
// q, k, v are zeros (they add nothing to S; y's are never read), the scores' ld is Tp.
void CudaBackend::attention_forward_gemm(const AttentionLaunch& l) {
  AttentionGemmBuffers g;
  const size_t bytes = carve(l, false, nullptr, g);
  carve(l, false, static_cast<char*>(scratch(bytes)), g);
  const DType in = l.bf16 ? DType::bf16 : DType::f32;
  const int64_t BH = l.B * l.H, T = l.T, Dp = g.Dp, Tp = g.Tp, rows = T * Dp, scores = T * Tp;
  ST_CUDA(launch_attention_gemm_pack_qkv(l, g, stream_));
  gemm_batched(in, false, true, T, T, Dp, 1.f, g.q, Dp, rows, g.k, Dp, rows, 0.f, g.s, Tp, scores, BH);
  ST_CUDA(launch_attention_gemm_softmax(l, g, stream_));
  gemm_batched(in, false, false, T, Dp, T, 1.f, g.p, Tp, scores, g.v, Dp, rows, 0.f, g.out[0], Dp, rows, BH);
  ST_CUDA(launch_attention_gemm_store_y(l, g, stream_));
}

// Per head: S = q k^T and dP = dy v^T, then (score_grads) P and dS; dv = P^T dy, dq = dS k,
// dk = dS^T q (dS carries the 1/sqrt(D) scale already, as in the tile kernels).
void CudaBackend::attention_backward_gemm(const AttentionLaunch& l, const float* dy, float* dqkv) {
  AttentionGemmBuffers g;
  const size_t bytes = carve(l, true, nullptr, g);
  carve(l, true, static_cast<char*>(scratch(bytes)), g);
  const DType in = l.bf16 ? DType::bf16 : DType::f32;
  const int64_t BH = l.B * l.H, T = l.T, Dp = g.Dp, Tp = g.Tp, rows = T * Dp, scores = T * Tp;
  ST_CUDA(launch_attention_gemm_pack_qkv(l, g, stream_));
  ST_CUDA(launch_attention_gemm_pack_dy(l, dy, g, stream_));
  gemm_batched(in, false, true, T, T, Dp, 1.f, g.q, Dp, rows, g.k, Dp, rows, 0.f, g.s, Tp, scores, BH);
  gemm_batched(in, false, true, T, T, Dp, 1.f, g.dy, Dp, rows, g.v, Dp, rows, 0.f, g.dp, Tp, scores, BH);
  ST_CUDA(launch_attention_gemm_score_grads(l, g, stream_));
  float *dq = g.out[0], *dk = g.out[1], *dv = g.out[2];
  gemm_batched(in, true, false, T, Dp, T, 1.f, g.p, Tp, scores, g.dy, Dp, rows, 0.f, dv, Dp, rows, BH);
  gemm_batched(in, false, false, T, Dp, T, 1.f, g.ds, Tp, scores, g.k, Dp, rows, 0.f, dq, Dp, rows, BH);
  gemm_batched(in, true, false, T, Dp, T, 1.f, g.ds, Tp, scores, g.q, Dp, rows, 0.f, dk, Dp, rows, BH);
  ST_CUDA(launch_attention_gemm_store_dqkv(l, g, dqkv, stream_));
}

}  // namespace seqtrain::cuda
