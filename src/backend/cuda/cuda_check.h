// Error checks for the CUDA, cuBLASLt and cuDNN calls of the CUDA backend: a failed call becomes
// a seqtrain::Error naming the call, the library's own message and the source line, so that an
// out-of-memory or a bad launch reads as an error of the run, never as a crash or a later
// garbage result. Compiled only into the plugin (it includes the CUDA headers).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/error.h"

namespace seqtrain::cuda {

[[noreturn]] void fail_cuda(const char* call, cudaError_t e, const char* file, int line);
[[noreturn]] void fail_cublas(const char* call, cublasStatus_t s, const char* file, int line);
[[noreturn]] void fail_cudnn(const char* call, cudnnStatus_t s, const char* file, int line);

}  // namespace seqtrain::cuda

#define ST_CUDA(call)                                                                   \
  do {                                                                                  \
    const cudaError_t st_e_ = (call);                                                   \
    if (st_e_ != cudaSuccess) ::seqtrain::cuda::fail_cuda(#call, st_e_, __FILE__, __LINE__); \
  } while (0)
#define ST_CUBLAS(call)                                                                          \
  do {                                                                                           \
    const cublasStatus_t st_s_ = (call);                                                         \
    if (st_s_ != CUBLAS_STATUS_SUCCESS) ::seqtrain::cuda::fail_cublas(#call, st_s_, __FILE__, __LINE__); \
  } while (0)
#define ST_CUDNN(call)                                                                          \
  do {                                                                                          \
    const cudnnStatus_t st_s_ = (call);                                                         \
    if (st_s_ != CUDNN_STATUS_SUCCESS) ::seqtrain::cuda::fail_cudnn(#call, st_s_, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: a bad configuration shows at the launch, not at some later call.
#define ST_CUDA_LAUNCHED() ST_CUDA(cudaGetLastError())
