#pragma once

// The kernels' host wrappers wait for their stream (to read back a count, a verdict, an
// overflow flag) with this bounded wait instead of cudaStreamSynchronize: a stream stuck
// behind a hung NCCL kernel (or any kernel that never ends) gives kTimeout after
// timeoutSeconds instead of blocking the calling thread forever. The timeout is the caller's
// (Config::timeoutSeconds through the executor; Workspace::waitTimeoutSeconds for the
// algorithms that take a workspace). On kTimeout the stream may still hold the stuck work:
// the caller owning an NcclComm aborts it (NcclComm::abort), which ends NCCL's kernels.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "cuda/bounded_wait.h"

namespace zen::cuda {

// Polls cudaStreamQuery (bounded_wait.h's pollUntil) until `stream` has finished its work:
// ok; a CUDA error from the query (a device fault): kInternal naming it; past timeoutSeconds:
// kTimeout "<what> did not complete within T s".
Status waitStream(cudaStream_t stream, double timeoutSeconds, const char* what);

// One look at events[*done] on (null ones skipped), *done moved past each that has completed:
// kDone once every one has, kPending at the first that has not (events[*done]), kFailed with
// the query's CUDA error (kInternal). Never waits.
PollState queryEvents(const std::vector<cudaEvent_t>& events, size_t* done, Status* failure);

// queryEvents polled (pollUntil) until every one of `events` has completed.
Status waitEvents(const std::vector<cudaEvent_t>& events,
                  double timeoutSeconds,
                  const std::string& what);

}  // namespace zen::cuda
