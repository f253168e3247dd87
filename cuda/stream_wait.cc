#include "cuda/stream_wait.h"

#include "cuda/bounded_wait.h"
#include "cuda/cuda_check.h"

namespace zen::cuda {

Status waitStream(cudaStream_t stream, double timeoutSeconds, const char* what) {
  return pollUntil(
      [&](Status* failure) {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q == cudaSuccess) return PollState::kDone;
        if (q == cudaErrorNotReady) return PollState::kPending;
        *failure = cudaErrorStatus(q, "cudaStreamQuery", __FILE__, __LINE__);
        return PollState::kFailed;
      },
      timeoutSeconds, what);
}

}  // namespace zen::cuda
