#pragma once

// Device memory that outlives a bucket (the device-resident outputs a handle owns:
// OpResult::gatheredOnDevice, sparseIndicesOnDevice, sparseValuesOnDevice) and the guard that
// code running on a framework's thread uses to touch a device without changing its current one.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "core/status.h"

namespace zen::cuda {

// Restores the calling thread's current device (accept runs on framework threads; a handle's
// memory is freed on whichever thread drops it last).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) (void)cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// *out = `bytes` of memory on `device`, the current device (cudaMalloc), freed with cudaFree
// on that device when its last owner lets go; cudaFree waits for the device, so a release never
// races work still queued on it. Null for 0 bytes.
Status ownedDeviceMemory(int device, size_t bytes, std::shared_ptr<void>* out);

}  // namespace zen::cuda
