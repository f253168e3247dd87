#include "cuda/workspace.h"

#include <cuda_runtime.h>

namespace zen::cuda {

Status Workspace::deviceBytes(int slot, size_t bytes, void** out) {
  if (slot < 0 || slot >= kDeviceSlots) {
    return ZEN_ERROR(StatusCode::kInternal, "workspace slot {} out of range [0, {})", slot,
                     kDeviceSlots);
  }
  // Never hand out a null pointer, even for zero bytes: kernels may form addresses from it.
  ZEN_RETURN_IF_ERROR(device_[slot].reserve(bytes == 0 ? 1 : bytes));
  *out = device_[slot].data();
  return Status::ok();
}

Status Workspace::pinnedBytes(int slot, size_t bytes, void** out) {
  if (slot < 0 || slot >= kPinnedSlots) {
    return ZEN_ERROR(StatusCode::kInternal, "pinned workspace slot {} out of range [0, {})", slot,
                     kPinnedSlots);
  }
  ZEN_RETURN_IF_ERROR(pinned_[slot].reserve(bytes == 0 ? 1 : bytes));
  *out = pinned_[slot].data();
  return Status::ok();
}

int Workspace::smCount() {
  if (smCount_ < 0) {
    int device = 0;
    int count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();  // clear it: gridBlocks() falls back to a fixed cap
      count = 0;
    }
    smCount_ = count;
  }
  return smCount_;
}

size_t Workspace::heldBytes() const {
  size_t bytes = 0;
  for (const auto& b : device_) bytes += b.capacity();
  return bytes;
}

}  // namespace zen::cuda
