#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aggregator.h"
#include "core/dtype.h"
#include "core/index_map.h"
#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// Algorithm 2 (ALGORITHMS.md §4): the hash bitmap, Pull's encoding. Server j sends one bit
// per member of I_j (bit p = local position p, LSB first within each byte) and the rows of
// the set bits in bit order, so every rank receives ceil(|G| / 8) bitmap bytes in total
// whatever the density, instead of 4 bytes per aggregated non-zero for COO.
struct EncodedPart {
  std::vector<uint8_t> bitmap;    // ceil(|I_j| / 8) bytes; padding bits past |I_j| are zero
  std::vector<std::byte> values;  // count rows in bit order, in the tensor dtype
  int64_t count = 0;              // set bits

  size_t wireBytes() const { return bitmap.size() + values.size(); }
};

// Bytes of part `part`'s bitmap: ceil(|I_j| / 8).
size_t bitmapBytesFor(const IndexMap& map, uint32_t part);

// Encodes an aggregation: the occupancy bitmap and, for each set bit, the accumulated row
// times `scale` (1 for Sum, 1/n for Average), scaled in the accumulator type and rounded
// once to the tensor dtype. Integers: the sum divided by 1/scale, truncated toward zero
// (so Average of a multiple of n is exact). `out`'s memory is reused.
Status encode(const PartitionAggregator& agg, double scale, EncodedPart* out);

// Decoders. Both check, before writing anything, that bitmapBytes == ceil(|I_j| / 8), that the
// padding bits past |I_j| are zero, and that valueBytes == popcount * rowBytes; a payload that
// fails is kInvalidArgument and is never read out of bounds. Indices are map.indexOf(part, p).

// Writes the rows of the set bits into `out`, a dense CPU [map.numRows() x rowSize] tensor of
// `dtype`. Rows not in the bitmap are left untouched (the caller zeroes the output).
Status decodeToDense(const IndexMap& map,
                     uint32_t part,
                     const uint8_t* bitmap,
                     size_t bitmapBytes,
                     const void* values,
                     size_t valueBytes,
                     DataType dtype,
                     int64_t rowSize,
                     const DenseView& out);

// Appends (index, row) for every set bit to `out`, in bit order (not sorted by index). An
// empty `out` takes numRows / rowSize / dtype from the arguments; a non-empty one must match.
Status decodeToSparse(const IndexMap& map,
                      uint32_t part,
                      const uint8_t* bitmap,
                      size_t bitmapBytes,
                      const void* values,
                      size_t valueBytes,
                      DataType dtype,
                      int64_t rowSize,
                      SparseTensor* out);

}  // namespace zen
