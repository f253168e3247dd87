#pragma once

// Server j's aggregation on the GPU (ALGORITHMS.md §5 step 3), the twin of
// core/aggregator.h: |I_j| accumulator rows (fp32 for fp16/bf16, fp64 for fp64, int64 for
// integers) that every rank's Push list is scatter-added into, and an occupancy bitmap
// (union semantics: a bit is set iff some rank pushed the position, even if rows cancel).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/index_map.h"
#include "core/status.h"
#include "cuda/device_buffer.h"

namespace zen::cuda {

class GpuAggregator {
 public:
  // Starts an aggregation of part `part`: accumulators and bitmap zeroed (asynchronously on
  // `stream`), memory kept from earlier steps when large enough.
  Status reset(
      const IndexMap& map, uint32_t part, DataType dtype, int64_t rowSize, cudaStream_t stream);

  // Scatter-adds `count` rows at local positions (device arrays, a Push list as received).
  // Asynchronous: a position >= size() (a corrupt payload) is found on the device; that
  // call then writes nothing, later calls are skipped, and check() or gpuEncode() report it.
  // Within one call, repeated positions are summed with atomics (order unspecified); calls
  // apply in stream order, so lists of distinct positions give the CPU's result exactly.
  Status add(const uint32_t* positions, const void* values, int64_t count, cudaStream_t stream);

  // Waits for the stream (at most timeoutSeconds: kTimeout) and reports a corrupt payload seen
  // by add().
  Status check(cudaStream_t stream, double timeoutSeconds);

  uint32_t part() const { return part_; }
  uint64_t size() const { return size_; }  // |I_j|
  DataType dtype() const { return dtype_; }
  int64_t rowSize() const { return rowSize_; }
  int64_t entriesAdded() const { return entriesAdded_; }

  // Device data: size() x rowSize accumulators of AccumulatorT<dtype's type>, and the
  // occupancy bitmap as 32-bit words, bit p of word p / 32 (LSB first, so its first
  // ceil(size / 8) bytes are Algorithm 2's bitmap); bits past size() are zero.
  const void* accumulators() const { return acc_.data(); }
  const uint32_t* occupancyWords() const { return bits_.as<const uint32_t>(); }
  int64_t occupancyWordCount() const { return static_cast<int64_t>((size_ + 31) / 32); }

  // The device words add() records an error in (first failing call, entry << 32 | position;
  // all ones while there is none), and the message for a host copy of them.
  const unsigned long long* errorWords() const { return errors_.as<const unsigned long long>(); }
  Status errorStatus(const unsigned long long* hostErrorWords) const;

 private:
  uint32_t part_ = 0;
  uint64_t size_ = 0;
  DataType dtype_ = DataType::kFloat32;
  int64_t rowSize_ = 1;
  int64_t entriesAdded_ = 0;
  uint64_t calls_ = 0;
  int smCount_ = -1;  // multiprocessors, read on the first add()
  DeviceBuffer acc_;
  DeviceBuffer bits_;
  DeviceBuffer errors_;  // 2 words
  PinnedBuffer hostErrors_;
};

}  // namespace zen::cuda
