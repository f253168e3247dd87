#pragma once

// An owning row-sparse COO tensor in device memory: what nonzero extraction produces and
// what the sparse decode can fill. Buffers are grown, never shrunk, so reuse is cheap.
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "cuda/device_buffer.h"

namespace zen::cuda {

struct GpuSparse {
  DeviceBuffer indices;  // int64 [nnz], row indices
  DeviceBuffer values;   // [nnz x rowSize] of dtype
  int64_t nnz = 0;
  int64_t numRows = 0;
  int64_t rowSize = 1;
  DataType dtype = DataType::kFloat32;
  int deviceIndex = 0;

  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
  // Grows both buffers for `rows` rows of the current rowSize and dtype.
  Status reserve(int64_t rows);
  // A device view (Device::cuda(deviceIndex)) for the GPU partitioner.
  SparseView view() const;
  // Copies to the host (synchronous), for tests and CPU fallbacks.
  Status toHost(SparseTensor* out) const;
};

}  // namespace zen::cuda
