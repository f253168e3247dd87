// Device memory owned past its bucket (cuda/device_memory.h).
#include "cuda/device_memory.h"

#include "cuda/cuda_check.h"

namespace zen::cuda {

Status ownedDeviceMemory(int device, size_t bytes, std::shared_ptr<void>* out) {
  out->reset();
  if (bytes == 0) return Status::ok();
  void* memory = nullptr;
  ZEN_CHECK_CUDA(cudaMalloc(&memory, bytes));
  *out = std::shared_ptr<void>(memory, [device](void* m) {
    DeviceGuard guard(device);
    (void)cudaFree(m);
  });
  return Status::ok();
}

}  // namespace zen::cuda
