// CudaBackend::gemm: backend.h's row-major C = alpha op(A) op(B) + beta C on cuBLASLt, fp32
// operands (TF32 tensor cores when tf32() allows it) or bf16 / fp16 operands, always with fp32
// accumulation and an fp32 C.
//
// cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is, read column-major,
// its transpose [c, r] with leading dimension ld; so the row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T: B's buffer goes in as cuBLASLt's first operand, A's as the
// second, with the same transpose flags and m = N, n = M.
//
// Every descriptor, layout and the heuristic's choice is made once per shape and kept
// (GemmCache), so that a training step after the first creates nothing and asks nothing. The
// shape includes the operands' pointer alignment: cuBLASLt's heuristic otherwise assumes 256-byte
// aligned buffers, and a view into the middle of one (a column block, an arena slice) would get
// an algorithm that cannot read it.
//
// gemm_batched (the GEMM attention path's products, cuda_attention.cpp) is the same product over
// a batch of equally shaped problems at fixed element strides, one cuBLASLt call through the
// layouts' BATCH_COUNT / STRIDED_BATCH_OFFSET; its plans share the cache (batch and strides are
// part of the key; a plain gemm is batch 1, strides 0).
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_core_kernels.h"
#include "core/error.h"

namespace seqtrain::cuda {
namespace {

struct GemmKey {
  DType in = DType::f32;
  bool ta = false, tb = false, tf32 = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;  // elements
  auto operator<=>(const GemmKey&) const = default;
};

// One shape's cuBLASLt objects; destroys them with itself (also when half made).
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, c = nullptr;  // cuBLASLt's A, B, C
  cublasLtMatmulAlgo_t algo{};

  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (second) (void)cublasLtMatrixLayoutDestroy(second);
    if (first) (void)cublasLtMatrixLayoutDestroy(first);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

// The largest power of two up to 256 that divides the value (an address, a byte stride).
uint32_t alignment_of_value(uintptr_t a) {
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}
uint32_t alignment_of(const void* p) { return alignment_of_value(reinterpret_cast<uintptr_t>(p)); }

// A batched operand's alignment is its worst problem's: the base's, or less where the stride
// between problems is less aligned.
uint32_t alignment_of(const void* p, int64_t stride, size_t element_bytes) {
  const uint32_t base = alignment_of(p), step = alignment_of_value(static_cast<uintptr_t>(stride) * element_bytes);
  return base < step ? base : step;
}

size_t element_bytes(DType in) { return in == DType::f32 ? 4 : 2; }

cudaDataType_t operand_type(DType in) {
  switch (in) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

cublasComputeType_t compute_type(const GemmKey& k) {
  if (k.in == DType::f32 && k.tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

// A row-major operand of `rows` x `cols` as stored, seen column-major: [cols, rows], ld.
cublasLtMatrixLayout_t row_major_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  ST_CUBLAS(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), ld));
  return l;
}

// Batch count and stride (elements) of a layout; batch 1 leaves cuBLASLt's defaults.
void set_batch(cublasLtMatrixLayout_t l, int64_t batch, int64_t stride) {
  if (batch == 1) return;
  const auto count = static_cast<int32_t>(batch);
  ST_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  ST_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

void set_transpose(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t which, bool t) {
  const cublasOperation_t op = t ? CUBLAS_OP_T : CUBLAS_OP_N;
  ST_CUBLAS(cublasLtMatmulDescSetAttribute(desc, which, &op, sizeof op));
}

// cuBLASLt's best algorithm for the plan's shape under the workspace and alignment limits.
cublasLtMatmulAlgo_t choose_algorithm(cublasLtHandle_t lt, const GemmPlan& p, const GemmKey& k,
                                      size_t workspace_bytes) {
  cublasLtMatmulPreference_t pref = nullptr;
  ST_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  struct Release {
    cublasLtMatmulPreference_t p;
    ~Release() { (void)cublasLtMatmulPreferenceDestroy(p); }
  } release{pref};
  auto set = [&](cublasLtMatmulPreferenceAttributes_t which, auto value) {
    ST_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, which, &value, sizeof value));
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  // cuBLASLt's A is our B and its B our A (see the top of this file).
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, k.align_b);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, k.align_a);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, k.align_c);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, k.align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ST_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.first, p.second, p.c, p.c, pref, 1, &result, &found));
  ST_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
           "cuBLASLt has no algorithm for a {} GEMM M={} N={} K={} (ta={}, tb={}, lda={}, ldb={}, ldc={}, batch={})",
           dtype_name(k.in), k.M, k.N, k.K, k.ta, k.tb, k.lda, k.ldb, k.ldc, k.batch);
  return result.algo;
}

std::unique_ptr<GemmPlan> make_plan(cublasLtHandle_t lt, const GemmKey& k, size_t workspace_bytes) {
  auto p = std::make_unique<GemmPlan>();
  ST_CUBLAS(cublasLtMatmulDescCreate(&p->desc, compute_type(k), CUDA_R_32F));
  set_transpose(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, k.tb);
  set_transpose(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, k.ta);
  const cudaDataType_t t = operand_type(k.in);
  p->first = row_major_layout(t, k.tb ? k.N : k.K, k.tb ? k.K : k.N, k.ldb);   // B as stored
  p->second = row_major_layout(t, k.ta ? k.K : k.M, k.ta ? k.M : k.K, k.lda);  // A as stored
  p->c = row_major_layout(CUDA_R_32F, k.M, k.N, k.ldc);
  set_batch(p->first, k.batch, k.stride_b);
  set_batch(p->second, k.batch, k.stride_a);
  set_batch(p->c, k.batch, k.stride_c);
  p->algo = choose_algorithm(lt, *p, k, workspace_bytes);
  return p;
}

// K = 0: C = beta C, and 0 for beta 0 whatever C held (BLAS's convention; gemm.cpp's too).
void scale_c(float* C, int64_t M, int64_t N, int64_t ldc, float beta, cudaStream_t s) {
  const size_t row_bytes = static_cast<size_t>(ldc) * sizeof(float);
  if (beta == 0.f) {
    ST_CUDA(cudaMemset2DAsync(C, row_bytes, 0, static_cast<size_t>(N) * sizeof(float), static_cast<size_t>(M), s));
    return;
  }
  if (beta == 1.f) return;
  ST_CUDA(launch_scale_block(C, M, N, ldc, beta, s));
}

// backend/cpu/gemm.cpp's gemm_has_work, with K = 0 handled on the device: false when there is
// nothing (more) to multiply.
bool gemm_has_work(const char* who, bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                   float beta, float* C, int64_t ldc, cudaStream_t s) {
  ST_CHECK(M >= 0 && N >= 0 && K >= 0, "{}: negative size M={} N={} K={}", who, M, N, K);
  if (M == 0 || N == 0) return false;
  ST_CHECK(ldc >= N, "{}: ldc={} is smaller than N={}", who, ldc, N);
  if (K == 0) {
    scale_c(C, M, N, ldc, beta, s);
    return false;
  }
  const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
  ST_CHECK(lda >= a_cols, "{}: lda={} is smaller than the {} columns of A (ta={})", who, lda, a_cols, ta);
  ST_CHECK(ldb >= b_cols, "{}: ldb={} is smaller than the {} columns of B (tb={})", who, ldb, b_cols, tb);
  return true;
}

}  // namespace

struct CudaBackend::GemmCache {
  std::map<GemmKey, std::unique_ptr<GemmPlan>> plans;
};

void CudaBackend::GemmCacheDeleter::operator()(GemmCache* c) const noexcept { delete c; }

void CudaBackend::gemm(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
                       int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  ST_CHECK(in == DType::f32 || in == DType::bf16 || in == DType::f16,
           "{} backend: GEMM on {} operands is not supported", name_, dtype_name(in));
  if (in != DType::f32)
    ST_CHECK(alpha == 1.f && (beta == 0.f || beta == 1.f),
             "{} backend: a {} GEMM takes alpha 1 and beta 0 or 1 (got {}, {})", name_, dtype_name(in), alpha, beta);
  const char* who = in == DType::f32 ? "gemm" : in == DType::bf16 ? "gemm_bf16" : "gemm_fp16";
  if (!gemm_has_work(who, ta, tb, M, N, K, lda, ldb, beta, C, ldc, stream_)) return;

  const GemmKey key{in, ta, tb, in == DType::f32 && tf32_, M, N, K, lda, ldb, ldc,
                    alignment_of(A), alignment_of(B), alignment_of(C), 1, 0, 0, 0};
  if (!gemm_cache_) gemm_cache_.reset(new GemmCache);
  std::unique_ptr<GemmPlan>& plan = gemm_cache_->plans[key];
  if (!plan) plan = make_plan(lt_, key, gemm_workspace_bytes_);
  ST_CUBLAS(cublasLtMatmul(lt_, plan->desc, &alpha, B, plan->first, A, plan->second, &beta, C, plan->c, C, plan->c,
                           &plan->algo, gemm_workspace_, gemm_workspace_bytes_, stream_));
}

// No K = 0 / empty-problem handling: its one caller (the attention path) never has either.
void CudaBackend::gemm_batched(DType in, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                               const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
                               int64_t stride_b, float beta, float* C, int64_t ldc, int64_t stride_c,
                               int64_t batch) {
  ST_CHECK(in == DType::f32 || in == DType::bf16 || in == DType::f16,
           "{} backend: batched GEMM on {} operands is not supported", name_, dtype_name(in));
  ST_CHECK(M > 0 && N > 0 && K > 0 && batch > 0 && batch <= INT32_MAX,
           "gemm_batched: sizes M={} N={} K={} batch={} must be positive (batch at most 2^31 - 1)", M, N, K, batch);
  ST_CHECK(lda >= (ta ? M : K) && ldb >= (tb ? K : N) && ldc >= N,
           "gemm_batched: leading dimensions lda={} ldb={} ldc={} too small for M={} N={} K={} (ta={}, tb={})", lda,
           ldb, ldc, M, N, K, ta, tb);
  const size_t e = element_bytes(in);
  const GemmKey key{in, ta, tb, in == DType::f32 && tf32_, M, N, K, lda, ldb, ldc,
                    alignment_of(A, stride_a, e), alignment_of(B, stride_b, e),
                    alignment_of(C, stride_c, sizeof(float)), batch, stride_a, stride_b, stride_c};
  if (!gemm_cache_) gemm_cache_.reset(new GemmCache);
  std::unique_ptr<GemmPlan>& plan = gemm_cache_->plans[key];
  if (!plan) plan = make_plan(lt_, key, gemm_workspace_bytes_);
  ST_CUBLAS(cublasLtMatmul(lt_, plan->desc, &alpha, B, plan->first, A, plan->second, &beta, C, plan->c, C, plan->c,
                           &plan->algo, gemm_workspace_, gemm_workspace_bytes_, stream_));
}

}  // namespace seqtrain::cuda
