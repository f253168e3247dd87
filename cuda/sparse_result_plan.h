#pragma once

// Host-side planning of a sparse bucket's result on the device (cuda/sparse_result.h) in plain
// C++, checked by test/cuda_host on every machine: the bucket's row ranges, each tensor's slice
// of the result once it is sorted by row, and the layout of the memory the handles own. The
// per-entry steps the kernels run are in cuda/sparse_result_steps.h.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"
#include "core/status.h"

namespace zen::cuda {

// The bucket's row ranges: tensor i's rows are [cuts[i], cuts[i + 1]) (Response::rowOffsets,
// back to back, then totalRows), so the sorted result splits at the first row >= each cut.
// kInternal when the offsets are missing or not back to back (the fusion planner's layout).
Result<std::vector<int64_t>> sparseResultCuts(const Response& response);

// Radix-sort key bits for rows in [0, totalRows) (at least 1).
int sparseResultKeyBits(int64_t totalRows);

// Tensor i's entries in the sorted result: [begin[i], begin[i] + count[i]).
struct SparseResultSplit {
  std::vector<int64_t> begin;
  std::vector<int64_t> count;
};
// From bounds[j] = the result's rows below cuts[j] (the device's lower bounds, one per cut)
// and rowsOutside, the result's rows outside [0, cuts.back()): only these cuts.size() + 1
// numbers come back to the host. kInternal when a row is outside the bucket or the bounds do
// not split nnz rows (not ascending, or not from 0 to nnz).
Result<SparseResultSplit> splitSparseResult(const std::vector<int64_t>& bounds,
                                            int64_t nnz,
                                            int64_t rowsOutside);

// One device allocation holds the bucket's sorted result: the local row indices (int64) at 0,
// the rows at valuesOffset (16-byte aligned, for wide copies), `bytes` in all (0 for nnz 0).
// Tensor i's handle owns a slice of it: indices at begin[i] * 8, rows at
// valuesOffset + begin[i] * rowBytes.
struct SparseResultLayout {
  size_t valuesOffset = 0;
  size_t bytes = 0;
};
SparseResultLayout layoutSparseResult(int64_t nnz, size_t rowBytes);

}  // namespace zen::cuda
