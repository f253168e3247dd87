#pragma once

// Exclusive prefix sums on the device (cub::DeviceScan), shared by the tile kernels.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "cuda/workspace.h"

namespace zen::cuda {

// out[i] = in[0] + ... + in[i - 1] for i < count (out[0] = 0); in and out are device arrays
// that must not overlap. Uses the workspace's cub slot.
Status exclusiveSum(
    const int64_t* in, int64_t* out, int64_t count, Workspace* workspace, cudaStream_t stream);

}  // namespace zen::cuda
