#pragma once

// Push-side output of the GPU partitioner, laid out like core/push_lists.h for an
// all-to-all-v: destination p's entries are [offsets[p], offsets[p + 1]) of the device
// arrays, each a 4-byte local position and a value row (this rank's duplicates summed).
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/push_lists.h"
#include "core/status.h"
#include "cuda/device_buffer.h"

namespace zen::cuda {

struct GpuPushLists {
  std::vector<int64_t> offsets;  // host copy, numParts + 1 (the counts NCCL needs)
  DeviceBuffer deviceOffsets;    // int64 [numParts + 1], the same on the device
  DeviceBuffer positions;        // uint32 [total]
  DeviceBuffer values;           // [total x rowSize] of dtype
  DataType dtype = DataType::kFloat32;
  int64_t rowSize = 1;
  int deviceIndex = 0;

  int numParts() const { return offsets.empty() ? 0 : static_cast<int>(offsets.size()) - 1; }
  int64_t count(int part) const { return offsets[part + 1] - offsets[part]; }
  int64_t total() const { return offsets.empty() ? 0 : offsets.back(); }
  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
  size_t wireBytes(int part) const {
    return static_cast<size_t>(count(part)) * (sizeof(uint32_t) + rowBytes());
  }
  const uint32_t* devicePositions() const { return positions.as<const uint32_t>(); }
  const void* deviceValues() const { return values.data(); }

  // Grows positions and values for `rows` rows of the current dtype and rowSize.
  Status reserve(int64_t rows);
  // Copies to a host PushLists (synchronous), for tests and CPU fallbacks.
  Status toHost(PushLists* out) const;
};

}  // namespace zen::cuda
