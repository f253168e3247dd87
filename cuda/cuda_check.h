#pragma once

// ZEN_CHECK_CUDA wraps a CUDA runtime call: on failure it returns a zen::Status (kInternal)
// naming the call, the CUDA error and the call site (CONVENTIONS.md §5). Only for functions
// that return Status; kernels report through device flags that the host reads.
#include <cuda_runtime.h>

#include "core/status.h"

namespace zen::cuda {

inline Status cudaErrorStatus(cudaError_t err, const char* what, const char* file, int line) {
  return Status(
      StatusCode::kInternal,
      fmt::format("{} failed: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)), file,
      line);
}

}  // namespace zen::cuda

#define ZEN_CHECK_CUDA(expr)                                                         \
  do {                                                                               \
    const cudaError_t zen_cuda_err_ = (expr);                                        \
    if (zen_cuda_err_ != cudaSuccess) {                                              \
      return ::zen::cuda::cudaErrorStatus(zen_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

// After a kernel launch: a bad configuration or an earlier asynchronous fault shows here.
#define ZEN_CHECK_LAUNCH(kernelName)                                                        \
  do {                                                                                      \
    const cudaError_t zen_cuda_err_ = cudaGetLastError();                                   \
    if (zen_cuda_err_ != cudaSuccess) {                                                     \
      return ::zen::cuda::cudaErrorStatus(zen_cuda_err_, "launch of " kernelName, __FILE__, \
                                          __LINE__);                                        \
    }                                                                                       \
  } while (0)
