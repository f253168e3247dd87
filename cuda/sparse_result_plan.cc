// A sparse bucket's result on the device, planned on the host (cuda/sparse_result_plan.h).
#include "cuda/sparse_result_plan.h"

#include <algorithm>

#include "cuda/gpu_plan.h"

namespace zen::cuda {

Result<std::vector<int64_t>> sparseResultCuts(const Response& response) {
  const size_t n = response.tensorNames.size();
  if (response.rowOffsets.size() != n || response.shapes.size() != n) {
    return ZEN_ERROR(StatusCode::kInternal,
                     "sparse bucket: {} row offsets and {} shapes for {} tensors",
                     response.rowOffsets.size(), response.shapes.size(), n);
  }
  std::vector<int64_t> cuts;
  cuts.reserve(n + 1);
  int64_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (response.rowOffsets[i] != next) {
      return ZEN_ERROR(StatusCode::kInternal,
                       "sparse bucket: tensor {} starts at row {}, expected {} (back to back)", i,
                       response.rowOffsets[i], next);
    }
    cuts.push_back(next);
    next += response.shapes[i].numRows();
  }
  if (next != response.totalRows) {
    return ZEN_ERROR(StatusCode::kInternal, "sparse bucket: its tensors have {} rows, totalRows {}",
                     next, response.totalRows);
  }
  cuts.push_back(next);
  return cuts;
}

int sparseResultKeyBits(int64_t totalRows) {
  return std::max(1, bitWidth(static_cast<uint64_t>(std::max<int64_t>(totalRows, 1) - 1)));
}

Result<SparseResultSplit> splitSparseResult(const std::vector<int64_t>& bounds,
                                            int64_t nnz,
                                            int64_t rowsOutside) {
  if (rowsOutside != 0) {
    return ZEN_ERROR(StatusCode::kInternal,
                     "sparse result of {} rows: {} of them outside the bucket's rows (a row "
                     "outside the bucket)",
                     nnz, rowsOutside);
  }
  if (bounds.empty() || bounds.front() != 0 || bounds.back() != nnz) {
    return ZEN_ERROR(StatusCode::kInternal,
                     "sparse result of {} rows: its bounds run from {} to {}, expected 0 to {} "
                     "(a row outside the bucket)",
                     nnz, bounds.empty() ? -1 : bounds.front(), bounds.empty() ? -1 : bounds.back(),
                     nnz);
  }
  SparseResultSplit s;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    if (bounds[j + 1] < bounds[j]) {
      return ZEN_ERROR(StatusCode::kInternal,
                       "sparse result: bound {} is {}, below bound {}'s {} (not sorted)", j + 1,
                       bounds[j + 1], j, bounds[j]);
    }
    s.begin.push_back(bounds[j]);
    s.count.push_back(bounds[j + 1] - bounds[j]);
  }
  return s;
}

SparseResultLayout layoutSparseResult(int64_t nnz, size_t rowBytes) {
  SparseResultLayout l;
  if (nnz <= 0) return l;
  const size_t indexBytes = static_cast<size_t>(nnz) * sizeof(int64_t);
  l.valuesOffset = (indexBytes + 15) / 16 * 16;
  l.bytes = l.valuesOffset + static_cast<size_t>(nnz) * rowBytes;
  return l;
}

}  // namespace zen::cuda
