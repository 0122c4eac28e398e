// The failure paths of cuda_check.h's macros.
#include "backend/cuda/cuda_check.h"

namespace seqtrain::cuda {

void fail_cuda(const char* call, cudaError_t e, const char* file, int line) {
  const char* fix = e == cudaErrorMemoryAllocation
                        ? " Fix: a smaller train.batch_size, runtime.precision bf16, or train.grad_checkpoint: true"
                        : "";
  fail("CUDA error in {} ({}:{}): {} ({}).{}", call, file, line, cudaGetErrorString(e), cudaGetErrorName(e), fix);
}

void fail_cublas(const char* call, cublasStatus_t s, const char* file, int line) {
  const char* fix = s == CUBLAS_STATUS_ALLOC_FAILED
                        ? " Fix: a smaller train.batch_size, runtime.precision bf16, or train.grad_checkpoint: true"
                        : "";
  fail("cuBLAS error in {} ({}:{}): status {}.{}", call, file, line, static_cast<int>(s), fix);
}

void fail_cudnn(const char* call, cudnnStatus_t s, const char* file, int line) {
  fail("cuDNN error in {} ({}:{}): {}", call, file, line, cudnnGetErrorString(s));
}

}  // namespace seqtrain::cuda
