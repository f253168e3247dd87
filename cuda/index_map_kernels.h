#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/index_map.h"
#include "core/status.h"

namespace zen::cuda {

// Level 1 of Algorithm 1 on the GPU: owner[i], pos[i] = IndexMap::place(indices[i]), the same
// function the CPU runs (core/index_map.h is host/device code). Indices outside
// [0, numRows) set *badIndex to the smallest offending position (initialise it to a value >= count)
// so the host can report a clear error. All pointers are device memory.
Status launchPlaceIndices(const IndexMap& map,
                          const int64_t* indices,
                          int64_t count,
                          uint32_t* owners,
                          uint32_t* positions,
                          unsigned long long* badIndex,
                          cudaStream_t stream);

}  // namespace zen::cuda
