// Exclusive scan of int64 counts with cub (decoupled look-back, one pass): reads and writes
// 8 bytes per item.
#include <cub/device/device_scan.cuh>

#include "cuda/cuda_check.h"
#include "cuda/scan.h"

namespace zen::cuda {

Status exclusiveSum(
    const int64_t* in, int64_t* out, int64_t count, Workspace* workspace, cudaStream_t stream) {
  if (count <= 0) return Status::ok();
  size_t tempBytes = 0;
  ZEN_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, in, out, count, stream));
  void* temp = nullptr;
  ZEN_RETURN_IF_ERROR(workspace->deviceBytes(Workspace::kCubSlot, tempBytes, &temp));
  ZEN_CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp, tempBytes, in, out, count, stream));
  return Status::ok();
}

}  // namespace zen::cuda
