#pragma once

// Device memory holding a copy of host values, for the device-only tests that pass device
// tensors through the Runtime (cuda_executor_gpu_test.cc, cuda_executor_exchange_gpu_test.cc,
// cuda_executor_timeout_gpu_test.cc, cuda_staging_gpu_test.cc).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "test/common/float_rows.h"

namespace zen::testing {

// `count` values of T at `device` (device memory), copied to the host.
template <typename T>
std::vector<T> downloadArray(const void* device, size_t count) {
  std::vector<T> out(count);
  if (count > 0) {
    EXPECT_EQ(cudaMemcpy(out.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return out;
}

// A copy of host values in memory on the calling thread's current device, freed with it.
template <typename T>
class DeviceArray {
 public:
  // Any allocator: SparseTensor::values is a RowBytes (core/tensor.h).
  template <typename Alloc>
  explicit DeviceArray(const std::vector<T, Alloc>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    if (n_ > 0) {
      EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* data() const { return data_; }
  std::vector<T> host() const { return downloadArray<T>(data_, n_); }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

// A host sparse tensor's copy on cuda:0 (the current device), and its view there.
struct DeviceRows {
  explicit DeviceRows(const Float32Rows& host)
      : indices(host.indices), values(host.values), view(host.view()) {
    view.indices = indices.data();
    view.values = values.data();
    view.device = Device::cuda(0);
  }
  DeviceArray<int64_t> indices;
  DeviceArray<float> values;
  SparseView view;
};

}  // namespace zen::testing
