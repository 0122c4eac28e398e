#include "backend/reference/reference_backend.h"
#include "backend/registry.h"

#include <cmath>

#include "backend/activation_loops.h"
#include "backend/cpu/half_scalar.h"  // the scalar definitions of the 16-bit roundings, no CPU code
#include "backend/reference/reference_rnn.h"
#include "core/error.h"

namespace seqtrain {

bool ReferenceBackend::supports(BackendOp op) const {
  switch (op) {
    case BackendOp::gemm_bf16: case BackendOp::gemm_f16:
    case BackendOp::rnn_bf16: case BackendOp::rnn_fp16: case BackendOp::rnn_grad_checkpoint:
    case BackendOp::attention_bf16: case BackendOp::half_output:
      return false;
    default:
      return true;
  }
}

void ReferenceBackend::gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                            const void* A, int64_t lda, const void* B, int64_t ldb, float beta, float* C,
                            int64_t ldc) {
  if (in == DType::bf16) require(BackendOp::gemm_bf16);
  if (in == DType::f16) require(BackendOp::gemm_f16);
  ST_CHECK(in == DType::f32, "the reference backend has no GEMM on {} operands", dtype_name(in));
  const auto* a = static_cast<const float*>(A);
  const auto* b = static_cast<const float*>(B);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double av = ta ? a[k * lda + i] : a[i * lda + k];
        const double bv = tb ? b[j * ldb + k] : b[k * ldb + j];
        acc += av * bv;
      }
      float& c = C[i * ldc + j];
      // beta 0 never reads C (BLAS semantics: C may hold garbage or NaN).
      c = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : static_cast<double>(beta) * c));
    }
}

// One element at a time through the bit-exact scalar definitions (round to nearest even); the
// CPU's vector kernels are tested against these (tests/test_precision.cpp).
void ReferenceBackend::convert(DType from, const void* src, DType to, void* dst, size_t n) {
  const bool narrow = check_convert(name(), from, to);
  const bool bf = (narrow ? to : from) == DType::bf16;
  for (size_t i = 0; i < n; ++i) {
    if (narrow) {
      const float v = static_cast<const float*>(src)[i];
      static_cast<uint16_t*>(dst)[i] = bf ? half_scalar::to_bf16(v) : half_scalar::to_fp16(v);
    } else {
      const uint16_t v = static_cast<const uint16_t*>(src)[i];
      static_cast<float*>(dst)[i] = bf ? half_scalar::from_bf16(v) : half_scalar::from_fp16(v);
    }
  }
}

void ReferenceBackend::bias_rows(const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = b[j];
}

void ReferenceBackend::bias_grad(const float* dy, float* db, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    double acc = 0.0;
    for (int64_t i = 0; i < rows; ++i) acc += dy[i * cols + j];
    db[j] = static_cast<float>(db[j] + acc);
  }
}

std::unique_ptr<RecurrentLayers> ReferenceBackend::make_recurrent(const RecurrentSpec& spec) {
  const DType compute = spec.options.precision.compute;
  if (compute == DType::bf16) require(BackendOp::rnn_bf16, "(runtime.precision bf16)");
  if (compute == DType::f16) require(BackendOp::rnn_fp16, "(runtime.precision fp16)");
  if (spec.options.grad_checkpoint) require(BackendOp::rnn_grad_checkpoint, "(train.grad_checkpoint)");
  return std::make_unique<ReferenceRecurrentLayers>(spec);
}

// torch.optim.AdamW's per-element formula, every intermediate in double, stored as float. The
// hyperparameters and t from the device step when there is one (its memory is the host's).
void ReferenceBackend::adamw(const AdamWUpdate& u) {
  if (u.skip && *u.skip != 0.f) return;  // an overflowed fp16 step
  const AdamWDeviceStep* d = u.device;
  const double lr = d ? d->lr : u.lr, beta1 = d ? d->beta1 : u.beta1, beta2 = d ? d->beta2 : u.beta2;
  const double eps = d ? d->eps : u.eps, wd = d ? d->weight_decay : u.weight_decay;
  const double t = d ? d->t : static_cast<double>(u.step);
  const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
  for (const DecayRange& r : *u.runs)
    for (size_t i = r.begin; i < r.end; ++i) {
      const double g = u.grads[i];
      double p = u.params[i];
      if (r.decay) p *= 1.0 - lr * wd;
      const double m = beta1 * u.m[i] + (1.0 - beta1) * g;
      const double v = beta2 * u.v[i] + (1.0 - beta2) * g * g;
      const double denom = std::sqrt(v) / std::sqrt(bc2) + eps;
      p -= lr / bc1 * m / denom;
      u.m[i] = static_cast<float>(m);
      u.v[i] = static_cast<float>(v);
      u.params[i] = static_cast<float>(p);
    }
}

void ReferenceBackend::sgd(const SgdUpdate& u) {
  for (const DecayRange& r : *u.runs)
    for (size_t i = r.begin; i < r.end; ++i) {
      double d = u.grads[i];
      if (r.decay) d += u.weight_decay * u.params[i];
      if (u.momentum != 0) {
        const double b = u.first ? d : u.momentum * u.momentum_buffer[i] + (1.0 - u.dampening) * d;
        u.momentum_buffer[i] = static_cast<float>(b);
        d = u.nesterov ? d + u.momentum * b : b;
      }
      u.params[i] = static_cast<float>(u.params[i] - u.lr * d);
    }
}

double ReferenceBackend::l2_norm(const float* x, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return std::sqrt(sum);
}

void ReferenceBackend::scale(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

void ReferenceBackend::fill(float* x, size_t n, float v) {
  for (size_t i = 0; i < n; ++i) x[i] = v;
}

void ReferenceBackend::copy(const float* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace seqtrain

namespace seqtrain {

void ReferenceBackend::activation_forward(ActKind k, const float* x, float* y, int64_t n) {
  activation_forward_loop(k, x, y, n);
}

void ReferenceBackend::activation_backward(ActKind k, const float* x, const float* y, const float* dy, float* dx,
                                           int64_t n) {
  activation_backward_loop(k, x, y, dy, dx, n);
}

}  // namespace seqtrain

namespace seqtrain {

// The oracle of the tests: one instance for the process.
BackendEntry reference_backend_entry() {
  BackendEntry e;
  e.name = "reference";
  e.make = [](std::string_view) -> Backend& {
    static ReferenceBackend reference;
    return reference;
  };
  return e;
}

}  // namespace seqtrain
