#pragma once

// Owning device and pinned-host allocations that grow on demand and are freed in the
// destructor: the building blocks of every workspace here (cudaMalloc'd once, reused).
#include <cstddef>

#include "core/status.h"

namespace zen::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  // Makes capacity() >= bytes (growCapacity's headroom). Growing frees the old memory first,
  // so the contents are lost.
  Status reserve(size_t bytes);
  // Frees the memory after waiting for the device (queued kernels may still use it).
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

// Page-locked host memory: the staging area for the few counters the host reads back
// (cudaMemcpyAsync into pageable memory would not be asynchronous).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;

  Status reserve(size_t bytes);
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

}  // namespace zen::cuda
