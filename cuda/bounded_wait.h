#pragma once

// The one bounded wait of the GPU layer, in plain C++ (no CUDA types, so test/cuda_host checks
// it on every machine): NcclComm's waits (nccl_plan.h's pollWithDeadline) and the kernels'
// stream waits (stream_wait.h) poll a query through it, and nothing on the GPU path waits
// without a bound ("lossless and loud": a hung kernel or collective becomes kTimeout).
#include <functional>
#include <string>

#include "core/status.h"

namespace zen::cuda {

// One look at an asynchronous operation.
enum class PollState { kDone, kPending, kFailed };

// Calls poll() until it says kDone (ok) or kFailed (its status, from *failure), or until
// timeoutSeconds have passed (kTimeout: "<what> did not complete within T s"); it polls at
// least once. Spins with yields for the first ~100 us, then sleeps in steps growing to 1 ms:
// work that takes microseconds is not slowed down, a long wait does not burn a core. `poll`
// fills *failure when it returns kFailed (else the result is kInternal "<what> failed").
Status pollUntil(const std::function<PollState(Status* failure)>& poll,
                 double timeoutSeconds,
                 const std::string& what);

}  // namespace zen::cuda
