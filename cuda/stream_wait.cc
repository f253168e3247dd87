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

PollState queryEvents(const std::vector<cudaEvent_t>& events, size_t* done, Status* failure) {
  for (; *done < events.size(); ++*done) {
    if (events[*done] == nullptr) continue;
    const cudaError_t q = cudaEventQuery(events[*done]);
    if (q == cudaErrorNotReady) return PollState::kPending;
    if (q != cudaSuccess) {
      *failure = cudaErrorStatus(q, "cudaEventQuery", __FILE__, __LINE__);
      return PollState::kFailed;
    }
  }
  return PollState::kDone;
}

Status waitEvents(const std::vector<cudaEvent_t>& events,
                  double timeoutSeconds,
                  const std::string& what) {
  size_t done = 0;  // events[0, done) have completed: each is queried until it has
  return pollUntil([&](Status* failure) { return queryEvents(events, &done, failure); },
                   timeoutSeconds, what);
}

}  // namespace zen::cuda
