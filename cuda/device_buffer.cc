#include "cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/gpu_plan.h"

namespace zen::cuda {

DeviceBuffer::~DeviceBuffer() {
  release();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

Status DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return Status::ok();
  const size_t capacity = growCapacity(capacity_, bytes);
  release();
  ZEN_CHECK_CUDA(cudaMalloc(&data_, capacity));
  capacity_ = capacity;
  return Status::ok();
}

void DeviceBuffer::release() {
  if (data_ != nullptr) {
    // cudaFree "may" synchronize; kernels still queued may read this memory, so wait for
    // them first. Rare: growth has headroom and objects live across calls. Nothing to
    // report from a destructor path.
    cudaDeviceSynchronize();
    cudaFree(data_);
  }
  data_ = nullptr;
  capacity_ = 0;
}

PinnedBuffer::~PinnedBuffer() {
  release();
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

Status PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return Status::ok();
  const size_t capacity = growCapacity(capacity_, bytes);
  release();
  ZEN_CHECK_CUDA(cudaMallocHost(&data_, capacity));
  capacity_ = capacity;
  return Status::ok();
}

void PinnedBuffer::release() {
  if (data_ != nullptr) {
    cudaDeviceSynchronize();  // an asynchronous copy may still use it
    cudaFreeHost(data_);
  }
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace zen::cuda
