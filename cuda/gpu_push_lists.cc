#include "cuda/gpu_push_lists.h"

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace zen::cuda {

Status GpuPushLists::reserve(int64_t rows) {
  ZEN_RETURN_IF_ERROR(positions.reserve(static_cast<size_t>(rows) * sizeof(uint32_t)));
  return values.reserve(static_cast<size_t>(rows) * rowBytes());
}

Status GpuPushLists::toHost(PushLists* out) const {
  out->offsets = offsets;
  out->dtype = dtype;
  out->rowSize = rowSize;
  const auto rows = static_cast<size_t>(total());
  out->positions.resize(rows);
  out->values.resize(rows * rowBytes());
  if (rows == 0) return Status::ok();
  ZEN_CHECK_CUDA(cudaMemcpy(out->positions.data(), positions.data(), rows * sizeof(uint32_t),
                            cudaMemcpyDeviceToHost));
  ZEN_CHECK_CUDA(
      cudaMemcpy(out->values.data(), values.data(), out->values.size(), cudaMemcpyDeviceToHost));
  return Status::ok();
}

}  // namespace zen::cuda
