// The AdamW update over the flat parameter buffer (optim/adamw.cpp forms the scalars). The
// per-element arithmetic follows torch's operation order, so the two agree to the last bit or
// close to it (FMA contraction on the AVX2 and AVX-512 levels may move the last bit).
#include "backend/cpu/kernels/level.h"

namespace seqtrain::ST_ISA_NS {

void adamw(const AdamWKernelArgs& a) {
  float* params = a.params;
  const float* grads = a.grads;
  float* m = a.m;
  float* v = a.v;
  const uint8_t* mask = a.decay_mask;
#pragma omp parallel for simd if (a.parallel)
  for (int64_t i = 0; i < a.n; ++i) {
    const float g = grads[i];
    float p = params[i] * (mask == nullptr || mask[i] ? a.s.decay : 1.f);
    const float mi = m[i] * a.s.b1 + a.s.one_minus_b1 * g;
    const float vi = v[i] * a.s.b2 + a.s.one_minus_b2 * g * g;
    const float denom = __builtin_sqrtf(vi) / a.s.bc2_sqrt + a.s.eps;
    p += a.s.neg_step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
    params[i] = p;
  }
}

}  // namespace seqtrain::ST_ISA_NS
