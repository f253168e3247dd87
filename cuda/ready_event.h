#pragma once

// A device entry's ready event (TensorEntry::ready): the one CudaExecutor::accept recorded on
// the framework's stream, else the framework's own, else none (the inputs are ready already).
#include <cuda_runtime.h>

#include "core/tensor_queue.h"

namespace zen::cuda {

inline cudaEvent_t readyEventOf(const TensorEntry& e) {
  if (e.deviceState) return static_cast<cudaEvent_t>(e.deviceState.get());
  return static_cast<cudaEvent_t>(e.ready.event);
}

}  // namespace zen::cuda
