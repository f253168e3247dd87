#pragma once

// Algorithm 2 (ALGORITHMS.md §4), the hash bitmap, on the GPU: the twin of
// core/hash_bitmap.h. Server j encodes its aggregation as ceil(|I_j| / 8) bitmap bytes (bit
// p = local position p, LSB first in each byte) and the rows of the set bits in bit order;
// every rank decodes each part into a dense tensor or into (index, row) pairs.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/hash_bitmap.h"
#include "core/index_map.h"
#include "core/status.h"
#include "core/tensor.h"
#include "cuda/device_buffer.h"
#include "cuda/gpu_aggregator.h"
#include "cuda/workspace.h"

namespace zen::cuda {

struct GpuEncodedPart {
  DeviceBuffer bitmap;  // bitmapBytes bytes; padding bits past |I_j| are zero
  DeviceBuffer values;  // count rows in bit order, in the tensor dtype
  size_t bitmapBytes = 0;
  int64_t count = 0;  // set bits
  DataType dtype = DataType::kFloat32;
  int64_t rowSize = 1;

  size_t valueBytes() const {
    return static_cast<size_t>(count) * static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  }
  size_t wireBytes() const { return bitmapBytes + valueBytes(); }
  // Copies to a host EncodedPart (synchronous), for tests and the CPU paths.
  Status toHost(EncodedPart* out) const;
};

// Encodes an aggregation: the bitmap, and each set bit's accumulated row times `scale` (1 for
// Sum, 1/n for Average), scaled in the accumulator type and rounded once to the dtype;
// integers: the sum divided by 1/scale, truncated toward zero — encode() on the CPU, bit for
// bit. Reports a corrupt payload seen by the aggregator's add(). Waits for `stream` once (the
// count sizes the output; bounded by workspace->waitTimeoutSeconds(), then kTimeout); the
// values are ready in stream order when it returns.
Status gpuEncode(const GpuAggregator& agg,
                 double scale,
                 GpuEncodedPart* out,
                 Workspace* workspace,
                 cudaStream_t stream);

// Decoders. Inputs and outputs are device memory, sizes are host numbers. Like the CPU
// decoders they refuse a payload whose bitmapBytes is not ceil(|I_j| / 8), whose padding bits
// are set, or whose valueBytes is not popcount x rowBytes (kInvalidArgument), and then write
// nothing: the checks run on the device before the writing kernels, which see their verdict.
// Both wait for `stream` to return that verdict (bounded as gpuEncode's wait).

// Writes each set bit's row at row map.indexOf(part, p) of `out`, a dense device tensor
// [map.numRows() x rowSize] of dtype; other rows are left untouched.
Status gpuDecodeToDense(const IndexMap& map,
                        uint32_t part,
                        const uint8_t* bitmap,
                        size_t bitmapBytes,
                        const void* values,
                        size_t valueBytes,
                        DataType dtype,
                        int64_t rowSize,
                        const DenseView& out,
                        Workspace* workspace,
                        cudaStream_t stream);

// Writes the payload's valueBytes / rowBytes rows as (index, row) pairs in bit order:
// outIndices[k] = map.indexOf(part, p_k), outValues row k = row k (device arrays with room
// for them, e.g. at this part's offset inside one output for all parts).
Status gpuDecodeToSparse(const IndexMap& map,
                         uint32_t part,
                         const uint8_t* bitmap,
                         size_t bitmapBytes,
                         const void* values,
                         size_t valueBytes,
                         DataType dtype,
                         int64_t rowSize,
                         int64_t* outIndices,
                         void* outValues,
                         Workspace* workspace,
                         cudaStream_t stream);

}  // namespace zen::cuda
