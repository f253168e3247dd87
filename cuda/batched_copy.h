#pragma once

// Fused copies into and out of a device fusion buffer (Horovod's BatchedD2DMemcpy): one
// launch per batch of up to kMaxCopiesPerLaunch device-to-device copies (cuda/device_bucket.h
// plans the batches), each in 16-byte units where both addresses and the size allow.
#include <cuda_runtime.h>

#include <vector>

#include "core/status.h"
#include "cuda/device_bucket.h"

namespace zen::cuda {

// Enqueues the copies on `stream` (async); jobs with src == nullptr are zero-filled.
Status batchedCopy(const std::vector<CopyJob>& jobs, cudaStream_t stream);

// Enqueues dst[k] = src[k] + offset for k < n (a fused sparse bucket's shifted indices). An
// index outside [0, rows) (its own tensor's rows) becomes -1, which the sparse allreduce then
// reports on every rank, instead of landing in a neighbour's rows.
Status offsetIndices(
    const int64_t* src, int64_t* dst, int64_t n, int64_t offset, int64_t rows, cudaStream_t stream);

}  // namespace zen::cuda
