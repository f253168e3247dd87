#pragma once

// Each thread's share of splitting a sparse bucket's sorted result (cuda/sparse_result.h),
// host/device: the kernels (cuda/sparse_result_kernels.cu) run these, test/cuda_host runs
// them on the CPU against a direct per-tensor reference. Rows compare as unsigned, the radix
// sort's order, so a negative row (never valid) sorts last and shows in the bounds.
#include <cstdint>

#include "core/host_device.h"

namespace zen::cuda::sparse_result {

// Whether `row` lies outside the bucket's [0, totalRows). The sort orders only the bits below
// totalRows' width, so such a row can land among valid ones and pass the bounds: it is
// counted on its own instead (a scheme bug, never valid input).
ZEN_HOST_DEVICE bool outsideBucket(int64_t row, int64_t totalRows) {
  return static_cast<uint64_t>(row) >= static_cast<uint64_t>(totalRows);
}

// The number of entries of sorted[0, n) below `cut`.
ZEN_HOST_DEVICE int64_t rowsBelow(const int64_t* sorted, int64_t n, int64_t cut) {
  int64_t lo = 0;
  int64_t hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<uint64_t>(sorted[mid]) < static_cast<uint64_t>(cut)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// A bucket row as its tensor's local row: minus the last cut <= row (cuts[0, m) ascending,
// cuts[0] == 0; empty tensors repeat a cut and are skipped). -1 below cuts[0].
ZEN_HOST_DEVICE int64_t localRow(const int64_t* cuts, int64_t m, int64_t row) {
  int64_t lo = 0;
  int64_t hi = m;
  while (lo < hi) {  // the first cut > row
    const int64_t mid = lo + (hi - lo) / 2;
    if (cuts[mid] <= row) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo == 0 ? -1 : row - cuts[lo - 1];
}

}  // namespace zen::cuda::sparse_result
