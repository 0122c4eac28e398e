// The AdamW update over the flat parameter buffer (optim/adamw.cpp forms the scalars). The
// per-element arithmetic follows torch's operation order, so the two agree to the last bit or
// close to it (FMA contraction on the AVX2 and AVX-512 levels may move the last bit).
//
// Written on vec.h's vectors: under `omp parallel for simd` the compiler kept the loop scalar
// (sqrtf's errno path), a sixteenth of the AVX-512 throughput. Every element, in a full vector
// or a masked tail, goes through the same vector operations, so where the runs and the threads'
// pieces cut the buffer does not change a bit of the result.
#include <omp.h>

#include "backend/cpu/kernels/level.h"
#include "backend/cpu/kernels/vec.h"

namespace seqtrain::ST_ISA_NS {

namespace {

// Threads' pieces start at multiples of this many floats: a cache line, whole vectors at every
// level, so no line is written by two threads.
constexpr int64_t kAlign = 16;

inline vf vsqrt(vf x) {
#if defined(__AVX512F__)
  return _mm512_maskz_sqrt_ps(0xffff, x);  // GCC 12 warns that the plain form reads an uninitialized register
#elif defined(__AVX2__)
  return _mm256_sqrt_ps(x);
#else
  return _mm_sqrt_ps(x);
#endif
}

// The update of [lo, hi), all of one run, the parameters scaled by `decay` first.
void update(const AdamWKernelArgs& a, int64_t lo, int64_t hi, float decay) {
  float* params = a.params + lo;
  const float* grads = a.grads + lo;
  float* m = a.m + lo;
  float* v = a.v + lo;
  // The scalars as local vectors: read through `a`, they were broadcast again every iteration
  // (the float stores might alias them).
  const vf dec = splat(decay), b1 = splat(a.s.b1), one_minus_b1 = splat(a.s.one_minus_b1);
  const vf b2 = splat(a.s.b2), one_minus_b2 = splat(a.s.one_minus_b2), bc2_sqrt = splat(a.s.bc2_sqrt);
  const vf eps = splat(a.s.eps), neg_step_size = splat(a.s.neg_step_size);
  for_lanes(hi - lo, [&](auto l) {
    const vf g = l.load(grads);
    vf p = l.load(params) * dec;
    // Rounded before the step is added, as torch's param.mul_() then addcdiv_(): without this
    // barrier GCC fuses the two into one FMA (the scalar loop kept them apart).
    asm("" : "+v"(p));
    const vf mi = l.load(m) * b1 + one_minus_b1 * g;
    const vf vi = l.load(v) * b2 + one_minus_b2 * g * g;
    const vf denom = vsqrt(vi) / bc2_sqrt + eps;
    p += neg_step_size * mi / denom;
    l.store(m, mi);
    l.store(v, vi);
    l.store(params, p);
  });
}

// The update of [lo, hi), run by run.
void update_range(const AdamWKernelArgs& a, int64_t lo, int64_t hi) {
  if (a.runs == nullptr) {
    update(a, lo, hi, a.s.decay);
    return;
  }
  // The runs may leave gaps (a frozen parameter group's elements), which stay untouched.
  for (int64_t r = 0; r < a.n_runs && lo < hi; ++r) {
    const AdamWRun& run = a.runs[r];
    if (run.end <= lo) continue;
    const int64_t begin = run.begin > lo ? run.begin : lo, end = imin(run.end, hi);
    if (begin < end) update(a, begin, end, run.decay ? a.s.decay : 1.f);
    lo = end;
  }
}

}  // namespace

void adamw(const AdamWKernelArgs& a) {
#pragma omp parallel if (a.parallel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    // Equal pieces rounded up to kAlign; the last threads' may be short or empty.
    const int64_t piece = ((a.n + threads - 1) / threads + kAlign - 1) / kAlign * kAlign;
    const int64_t lo = imin(a.n, t * piece);
    update_range(a, lo, imin(a.n, lo + piece));
  }
}

}  // namespace seqtrain::ST_ISA_NS
