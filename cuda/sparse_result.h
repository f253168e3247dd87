#pragma once

// A sparse bucket's coalesced result delivered on the device (cuda/cuda_executor.h), for
// buckets whose tensors (some or all) want a sparse result:
// - sorted by row on the device and split per tensor there (cuda/sparse_result_kernels.h);
//   only the bounds, one number per tensor plus one, come back to the host, to size each
//   tensor's slice (cuda/sparse_result_plan.h);
// - a tensor wanting a sparse result gets its slice (row indices local to the tensor, as
//   ops::SparseBucket::split gives them) as device memory its handle owns
//   (OpResult::sparseIndicesOnDevice / sparseValuesOnDevice: slices of one cudaMalloc per
//   bucket, freed with the last handle holding one);
// - a tensor with a dense output (a mixed bucket) gets its output zero-filled, then its rows
//   scattered into it, on the stream.
// One per executor (its workspace serves one stream at a time).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"
#include "cuda/workspace.h"

namespace zen::cuda {

struct SparseResultInput {
  const int64_t* indices = nullptr;  // the coalesced result over the bucket's rows, any order
  const void* values = nullptr;
  int64_t nnz = 0;
  int device = 0;  // where it is, the current device
  cudaStream_t stream = nullptr;
  // Synchronizes the stream with a bound (NcclComm::wait), to read the bounds.
  std::function<Status(const char* what)> wait;
};

class SparseResultDelivery {
 public:
  // Writes every present entry's output. *queued: work for a dense output was queued on the
  // stream after the last wait (the bucket ends when the stream passes it).
  Status deliver(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 const SparseResultInput& input,
                 bool* queued);

 private:
  Workspace workspace_;
};

}  // namespace zen::cuda
