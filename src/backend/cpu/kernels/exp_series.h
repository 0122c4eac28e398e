// The tail of e^r's Taylor polynomial for |r| <= ln2/2, shared by the vector exp of the gate and
// softmax kernels (vec.h) and the scalar exp of GELU (fast_math.h), so both reduce x the same way
// and evaluate the same coefficients. Horner's scheme from the r^6 term down: `p` arrives holding
// what lies above r^5 (1/720 for the degree-6 polynomial, (1/5040) r + 1/720 for degree 7), and
// V is a float or a GCC float vector (scalars broadcast in vector arithmetic).
// Internal linkage, as vec.h's helpers (every ISA level's object gets its own copy).
#pragma once

namespace seqtrain {
namespace {

template <class V>
inline V exp_taylor_tail(V p, V r) {
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  return p * r + 1.f;
}

}  // namespace
}  // namespace seqtrain
