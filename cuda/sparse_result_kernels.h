#pragma once

// The device steps of a sparse bucket's result (cuda/sparse_result.h), asynchronous on
// `stream`; pointers are device memory unless said otherwise.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "cuda/workspace.h"

namespace zen::cuda {

struct SortedSplitArgs {
  const int64_t* indices = nullptr;  // the coalesced result: nnz distinct bucket rows, any order
  const void* values = nullptr;      // their rows, rowBytes each
  int64_t nnz = 0;
  size_t rowBytes = 0;
  int keyBits = 64;                            // every row < 2^keyBits (sparseResultKeyBits)
  const std::vector<int64_t>* cuts = nullptr;  // host: the row ranges (sparseResultCuts)
  int64_t* localIndices = nullptr;  // out [nnz]: the rows ascending, each minus its tensor's first
  void* sortedValues = nullptr;     // out [nnz x rowBytes]: row k is localIndices[k]'s
};

// Sorts the result by row, finds where each cut falls in it and makes the rows local to their
// tensors. *bounds: cuts.size() + 1 numbers (the rows below each cut, then the rows outside
// [0, cuts.back()), which only a wrong result has) in the workspace's pinned memory, readable once
// the stream has passed this point; the caller synchronizes the stream before reading them and
// before the next call (which reuses the pinned memory).
Status sortAndSplitRows(const SortedSplitArgs& args,
                        Workspace* workspace,
                        cudaStream_t stream,
                        const int64_t** bounds);

// dense row at[k] = row k of `rows` for k < count (rows of rowBytes, `at` distinct; the rest of
// dense is the caller's: zero-filled before for a sparse result's dense output).
Status scatterRows(const void* rows,
                   const int64_t* at,
                   int64_t count,
                   size_t rowBytes,
                   void* dense,
                   int smCount,
                   cudaStream_t stream);

}  // namespace zen::cuda
