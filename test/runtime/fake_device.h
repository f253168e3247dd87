#pragma once

// A GPU that is host memory behind addresses the host cannot use, for the tests of host
// staging (cuda/host_staging.h) on machines without one: a "device" pointer is a host pointer
// with bit 62 set, a non-canonical x86-64 address, so any code that reads or writes it
// directly (instead of through the staging copies) crashes the test. FakeDeviceStaging
// copies through the real pointers; NoDeviceExecutor stands in for the CUDA executor and
// fails any bucket given to it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/executor.h"
#include "cuda/host_staging.h"

namespace zen::testing {

inline constexpr uintptr_t kFakeDeviceBit = uintptr_t{1} << 62;

inline void* toFakeDevice(const void* host) {
  if (host == nullptr) return nullptr;
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(host) | kFakeDeviceBit);
}
inline bool onFakeDevice(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & kFakeDeviceBit) != 0;
}
inline void* fromFakeDevice(const void* device) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(device) & ~kFakeDeviceBit);
}

// Host memory as a view on the fake cuda:0.
inline DenseView onDevice(DenseView v) {
  v.data = toFakeDevice(v.data);
  v.device = Device::cuda(0);
  return v;
}
inline SparseView onDevice(SparseView v) {
  v.indices = static_cast<const int64_t*>(toFakeDevice(v.indices));
  v.values = toFakeDevice(v.values);
  v.device = Device::cuda(0);
  return v;
}

class FakeDeviceStaging final : public cuda::DeviceStaging {
 public:
  Status prepare(int device, const std::vector<TensorEntry*>& entries) override {
    ++prepared;
    if (device != 0) return ZEN_ERROR(StatusCode::kInternal, "staged on cuda:{}", device);
    for (const TensorEntry* e : entries) {
      if (e != nullptr && !(entryDevice(*e) == Device::cuda(0))) {
        return ZEN_ERROR(StatusCode::kInternal, "'{}' is not on cuda:0", e->request.name);
      }
    }
    return Status::ok();
  }
  // Reused and grown like the CUDA executor's, poisoned each time: a twin the copies did
  // not fill shows as a wrong result.
  Result<std::byte*> hostMemory(size_t bytes) override {
    if (bytes > region_.size()) region_.resize(bytes);
    std::memset(region_.data(), 0xa5, region_.size());
    if (region_.empty()) region_.resize(1);
    return region_.data();
  }
  Status toHost(const std::vector<cuda::StagedCopy>& copies) override {
    if (!failToHost.isOk()) return failToHost;
    return copy(copies, /*srcOnDevice=*/true);
  }
  Status toDevice(const std::vector<cuda::StagedCopy>& copies) override {
    return copy(copies, /*srcOnDevice=*/false);
  }
  Status allocate(size_t bytes, std::shared_ptr<void>* out) override {
    out->reset();
    if (bytes == 0) return Status::ok();
    void* memory = std::malloc(bytes);
    if (memory == nullptr) return ZEN_ERROR(StatusCode::kInternal, "malloc({})", bytes);
    std::memset(memory, 0xa5, bytes);  // poisoned until the results' copies land
    *out =
        std::shared_ptr<void>(toFakeDevice(memory), [](void* p) { std::free(fromFakeDevice(p)); });
    return Status::ok();
  }

  Status failToHost;  // set by a test: every toHost fails with it
  int prepared = 0;

 private:
  // Each copy goes between a device and a host address, the right way round.
  static Status copy(const std::vector<cuda::StagedCopy>& copies, bool srcOnDevice) {
    for (const cuda::StagedCopy& c : copies) {
      if (c.bytes == 0) continue;
      if (onFakeDevice(c.src) != srcOnDevice || onFakeDevice(c.dst) == srcOnDevice) {
        return ZEN_ERROR(StatusCode::kInternal, "a staged copy of {} B from {} to {}", c.bytes,
                         onFakeDevice(c.src) ? "the device" : "the host",
                         onFakeDevice(c.dst) ? "the device" : "the host");
      }
      std::memcpy(fromFakeDevice(c.dst), fromFakeDevice(c.src), c.bytes);
    }
    return Status::ok();
  }

  std::vector<std::byte> region_;
};

// The CUDA executor's place: takes device tensors at enqueue, runs nothing.
class NoDeviceExecutor final : public Executor {
 public:
  Status execute(const Response& response,
                 const std::vector<TensorEntry*>&,
                 BucketReport*) override {
    return ZEN_ERROR(StatusCode::kInternal, "{} of '{}' reached the device executor",
                     responseTypeName(response.type), response.tensorNames.front());
  }
  Status accept(TensorEntry&) override { return Status::ok(); }
};

}  // namespace zen::testing
