#include "cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/gpu_plan.h"

namespace zen::cuda {
namespace {

cudaError_t allocate(Memory memory, void** data, size_t bytes) {
  return memory == Memory::kDevice ? cudaMalloc(data, bytes) : cudaMallocHost(data, bytes);
}

void deallocate(Memory memory, void* data) {
  if (memory == Memory::kDevice) {
    cudaFree(data);
  } else {
    cudaFreeHost(data);
  }
}

}  // namespace

template <Memory kMemory>
GrowingBuffer<kMemory>::~GrowingBuffer() {
  release();
}

template <Memory kMemory>
GrowingBuffer<kMemory>::GrowingBuffer(GrowingBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

template <Memory kMemory>
GrowingBuffer<kMemory>& GrowingBuffer<kMemory>::operator=(GrowingBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

template <Memory kMemory>
Status GrowingBuffer<kMemory>::reserve(size_t bytes) {
  if (bytes <= capacity_) return Status::ok();
  const size_t capacity = growCapacity(capacity_, bytes);
  release();
  ZEN_CHECK_CUDA(allocate(kMemory, &data_, capacity));
  capacity_ = capacity;
  return Status::ok();
}

template <Memory kMemory>
void GrowingBuffer<kMemory>::release() {
  if (data_ != nullptr) {
    // cudaFree "may" synchronize; kernels or copies still queued may use this memory, so
    // wait for them first. Rare: growth has headroom and objects live across calls. Nothing
    // to report from a destructor path. Unbounded, and it must stay so: cudaFree itself
    // waits for the whole device, so a bounded wait here would not bound the free. Callers
    // bound it instead by waiting for their stream first (the executor's reserve and
    // shutdown, the wrappers' stream waits; NcclComm aborts stuck collectives on a timeout).
    cudaDeviceSynchronize();
    deallocate(kMemory, data_);
  }
  data_ = nullptr;
  capacity_ = 0;
}

template class GrowingBuffer<Memory::kDevice>;
template class GrowingBuffer<Memory::kPinnedHost>;

}  // namespace zen::cuda
