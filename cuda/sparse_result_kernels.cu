// A sparse bucket's coalesced result sorted by row and split per tensor on the device.
//
// Steps for nnz result rows of B bytes and m = tensors + 1 cuts:
//   1. permutation: perm[k] = k.
//   2. cub::DeviceRadixSort::SortPairs of the rows (as unsigned, keyBits bits) carrying perm:
//      the sorted rows go straight to the output's index slice.
//   3. gather: output row k = input row perm[k] (copyRows, the widest aligned unit).
//   4. bounds: bounds[j] = rows below cuts[j], a binary search per cut, and bounds[m] = rows
//      outside the bucket (counted over the input: step 2 sorts only keyBits bits, so such a
//      row would not show in the bounds); the m + 1 numbers go to pinned host memory, the only
//      numbers the host reads back.
//   5. local rows: each sorted row minus its tensor's first row (a binary search over the
//      cuts), in place; skipped for one tensor, whose first row is 0.
// Memory traffic per row: the sort's passes over 16 bytes (row and permutation) each; the
// gather B read and B written (8 more read); 8 read and 8 written to localize. Per tensor:
// 8 bytes each way between host and device.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "cuda/atomics.h"
#include "cuda/device_util.cuh"
#include "cuda/sparse_result_kernels.h"
#include "cuda/sparse_result_steps.h"

namespace zen::cuda {
namespace {

enum Slot : int { kPermutationSlot = 1, kSortedPermutationSlot, kCutsSlot, kBoundsSlot };
enum PinnedSlot : int { kCutsPinned = 0, kBoundsPinned };

__global__ void iotaKernel(int64_t* out, int64_t n) {
  for (int64_t k = globalThread(); k < n; k += gridThreads()) out[k] = k;
}

__global__ void boundsKernel(
    const int64_t* sorted, int64_t nnz, const int64_t* cuts, int64_t m, int64_t* bounds) {
  for (int64_t j = globalThread(); j < m; j += gridThreads()) {
    bounds[j] = sparse_result::rowsBelow(sorted, nnz, cuts[j]);
  }
}

// bounds[m] must be 0 before; only rows outside add to it (none, unless a scheme is wrong).
__global__ void outsideKernel(const int64_t* rows,
                              int64_t nnz,
                              int64_t totalRows,
                              unsigned long long* outside) {
  for (int64_t k = globalThread(); k < nnz; k += gridThreads()) {
    if (sparse_result::outsideBucket(rows[k], totalRows)) atomicAddU64(outside, 1);
  }
}

__global__ void localRowsKernel(int64_t* rows, int64_t nnz, const int64_t* cuts, int64_t m) {
  for (int64_t k = globalThread(); k < nnz; k += gridThreads()) {
    rows[k] = sparse_result::localRow(cuts, m, rows[k]);
  }
}

}  // namespace

Status sortAndSplitRows(const SortedSplitArgs& a,
                        Workspace* workspace,
                        cudaStream_t stream,
                        const int64_t** bounds) {
  const std::vector<int64_t>& cuts = *a.cuts;
  const auto m = static_cast<int64_t>(cuts.size());
  int64_t* hostCuts = nullptr;
  int64_t* hostBounds = nullptr;
  ZEN_RETURN_IF_ERROR(workspace->pinned(kCutsPinned, m, &hostCuts));
  ZEN_RETURN_IF_ERROR(workspace->pinned(kBoundsPinned, m + 1, &hostBounds));
  *bounds = hostBounds;
  if (a.nnz <= 0) {
    std::fill(hostBounds, hostBounds + m + 1, int64_t{0});
    return Status::ok();
  }
  const int sm = workspace->smCount();
  int64_t* perm = nullptr;
  int64_t* sortedPerm = nullptr;
  int64_t* deviceCuts = nullptr;
  int64_t* deviceBounds = nullptr;
  ZEN_RETURN_IF_ERROR(workspace->device(kPermutationSlot, a.nnz, &perm));
  ZEN_RETURN_IF_ERROR(workspace->device(kSortedPermutationSlot, a.nnz, &sortedPerm));
  ZEN_RETURN_IF_ERROR(workspace->device(kCutsSlot, m, &deviceCuts));
  ZEN_RETURN_IF_ERROR(workspace->device(kBoundsSlot, m + 1, &deviceBounds));
  // 1-2. Rows are in [0, 2^keyBits): as unsigned keys, only those bits need sorting.
  iotaKernel<<<gridBlocks(a.nnz, kBlockThreads, sm), kBlockThreads, 0, stream>>>(perm, a.nnz);
  ZEN_CHECK_LAUNCH("iotaKernel");
  const auto* keysIn = reinterpret_cast<const unsigned long long*>(a.indices);
  auto* keysOut = reinterpret_cast<unsigned long long*>(a.localIndices);
  size_t tempBytes = 0;
  ZEN_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, keysIn, keysOut, perm,
                                                 sortedPerm, a.nnz, 0, a.keyBits, stream));
  void* temp = nullptr;
  ZEN_RETURN_IF_ERROR(workspace->deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
  ZEN_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, tempBytes, keysIn, keysOut, perm, sortedPerm,
                                                 a.nnz, 0, a.keyBits, stream));
  // 3.
  ZEN_RETURN_IF_ERROR(copyRows(a.values, a.sortedValues, a.nnz, a.rowBytes,
                               ListRow<int64_t>{sortedPerm}, IdentityRow{}, nullptr, sm, stream));
  // 4. The host wrote the pinned cuts after the previous call's synchronization.
  std::copy(cuts.begin(), cuts.end(), hostCuts);
  ZEN_CHECK_CUDA(cudaMemcpyAsync(deviceCuts, hostCuts, static_cast<size_t>(m) * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, stream));
  boundsKernel<<<gridBlocks(m, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
      a.localIndices, a.nnz, deviceCuts, m, deviceBounds);
  ZEN_CHECK_LAUNCH("boundsKernel");
  ZEN_CHECK_CUDA(cudaMemsetAsync(deviceBounds + m, 0, sizeof(int64_t), stream));
  outsideKernel<<<gridBlocks(a.nnz, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
      a.indices, a.nnz, cuts.back(), reinterpret_cast<unsigned long long*>(deviceBounds + m));
  ZEN_CHECK_LAUNCH("outsideKernel");
  ZEN_CHECK_CUDA(cudaMemcpyAsync(hostBounds, deviceBounds,
                                 static_cast<size_t>(m + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream));
  // 5. After the bounds, which read the bucket's rows. A bucket of one tensor (cuts 0 and
  // totalRows) has its rows local already; a row outside it fails the bounds either way.
  if (m > 2) {
    localRowsKernel<<<gridBlocks(a.nnz, kBlockThreads, sm), kBlockThreads, 0, stream>>>(
        a.localIndices, a.nnz, deviceCuts, m);
    ZEN_CHECK_LAUNCH("localRowsKernel");
  }
  return Status::ok();
}

Status scatterRows(const void* rows,
                   const int64_t* at,
                   int64_t count,
                   size_t rowBytes,
                   void* dense,
                   int smCount,
                   cudaStream_t stream) {
  return copyRows(rows, dense, count, rowBytes, IdentityRow{}, ListRow<int64_t>{at}, nullptr,
                  smCount, stream);
}

}  // namespace zen::cuda
