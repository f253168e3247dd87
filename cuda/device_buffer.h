#pragma once

// Owning device and pinned-host allocations that grow on demand and are freed in the
// destructor: the building blocks of every workspace here (cudaMalloc'd once, reused).
#include <cstddef>

#include "core/status.h"

namespace zen::cuda {

enum class Memory {
  kDevice,  // cudaMalloc
  // Page-locked host memory (cudaMallocHost): the staging area for the few counters the
  // host reads back (cudaMemcpyAsync into pageable memory would not be asynchronous).
  kPinnedHost,
};

template <Memory kMemory>
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  ~GrowingBuffer();
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  GrowingBuffer(GrowingBuffer&& other) noexcept;
  GrowingBuffer& operator=(GrowingBuffer&& other) noexcept;

  // Makes capacity() >= bytes (growCapacity's headroom). Growing frees the old memory first,
  // so the contents are lost.
  Status reserve(size_t bytes);
  // Frees the memory after waiting for the device (queued kernels or copies may still use it).
  void release();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Both instantiated in device_buffer.cc.
using DeviceBuffer = GrowingBuffer<Memory::kDevice>;
using PinnedBuffer = GrowingBuffer<Memory::kPinnedHost>;

}  // namespace zen::cuda
