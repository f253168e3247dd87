// Algorithm 2, the hash bitmap, on the CPU (ALGORITHMS.md §4 and §5 steps 4-5).
//
// Steps:
//   encode (server j): the aggregator's occupancy words become ceil(|I_j| / 8) bitmap bytes
//     (bit p of byte p / 8, LSB first); the rows of the set bits, scaled in the accumulator
//     type and rounded once to the tensor dtype, are compacted in bit order.
//   decode (every rank, every part): validate the payload, then walk the bitmap a 64-bit word
//     at a time (ctz + clear-lowest-bit) and send the k-th set bit's position p to
//     index = map.indexOf(j, p) with the k-th row; the inverse permutation runs over batches
//     of 256 positions (core/feistel_batch.h, bit-identical to indexOf).
// Bytes on the wire per rank, received: sum over the n - 1 other servers of
// ceil(|I_j| / 8) + nnz_j * rowBytes, i.e. about (n - 1) / n * (|G| / 8 + aggregated nnz *
// rowBytes); the n bitmaps including one's own total exactly ceil(|G| / 8).
#include "core/hash_bitmap.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/bitmap_popcount.h"
#include "core/bitmap_walk.h"

namespace zen {
namespace {

// The checks shared by both decoders; returns the number of rows in the payload.
Result<int64_t> checkPayload(const IndexMap& map,
                             uint32_t part,
                             const uint8_t* bitmap,
                             size_t bitmapBytes,
                             const void* values,
                             size_t valueBytes,
                             size_t rowBytes) {
  ZEN_CHECK_ARG(static_cast<int64_t>(part) < map.numParts(),
                "bitmap for part {} but the index map has {} parts", part, map.numParts());
  const uint64_t size = map.partSize(static_cast<int>(part));
  const size_t expected = static_cast<size_t>((size + 7) / 8);
  ZEN_CHECK_ARG(bitmapBytes == expected,
                "bitmap of part {} has {} bytes, expected ceil({} / 8) = {}", part, bitmapBytes,
                size, expected);
  ZEN_CHECK_ARG(bitmapBytes == 0 || bitmap != nullptr, "bitmap of part {} has no buffer", part);
  if (size % 8 != 0) {
    const uint8_t padding = bitmap[bitmapBytes - 1] >> (size % 8);
    ZEN_CHECK_ARG(padding == 0,
                  "bitmap of part {} has padding bits set past its {} positions (last byte "
                  "0x{:02x})",
                  part, size, bitmap[bitmapBytes - 1]);
  }
  const auto count = static_cast<int64_t>(bitmapPopcount(bitmap, bitmapBytes));
  ZEN_CHECK_ARG(valueBytes % rowBytes == 0 && valueBytes / rowBytes == static_cast<size_t>(count),
                "part {} sent {} value bytes, expected {} set bits x {} bytes per row = {}", part,
                valueBytes, count, rowBytes, static_cast<size_t>(count) * rowBytes);
  ZEN_CHECK_ARG(valueBytes == 0 || values != nullptr, "values of part {} have no buffer", part);
  return count;
}

// dst = src * scale, rounded once to T (see encode() in the header for integers).
template <typename T>
void scaleRow(const AccumulatorT<T>* src, int64_t rowSize, double scale, T* dst) {
  using Acc = AccumulatorT<T>;
  if (scale == 1.0) {
    for (int64_t e = 0; e < rowSize; ++e) dst[e] = fromAccumulator<T>(src[e]);
  } else if constexpr (std::is_integral_v<T>) {
    const double divisor = 1.0 / scale;
    for (int64_t e = 0; e < rowSize; ++e) {
      dst[e] = static_cast<T>(std::trunc(static_cast<double>(src[e]) / divisor));
    }
  } else {
    const Acc s = static_cast<Acc>(scale);
    for (int64_t e = 0; e < rowSize; ++e) dst[e] = fromAccumulator<T>(src[e] * s);
  }
}

}  // namespace

size_t bitmapBytesFor(const IndexMap& map, uint32_t part) {
  return static_cast<size_t>((map.partSize(static_cast<int>(part)) + 7) / 8);
}

Status encode(const PartitionAggregator& agg, double scale, EncodedPart* out) {
  ZEN_CHECK_ARG(out != nullptr, "encode needs an output");
  ZEN_CHECK_ARG(std::isfinite(scale) && scale != 0.0, "scale must be finite and non-zero, got {}",
                scale);
  const uint64_t size = agg.size();
  const std::vector<uint64_t>& words = agg.occupancy();
  const size_t bytes = static_cast<size_t>((size + 7) / 8);
  out->bitmap.resize(bytes);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // Bit p of word p / 64, LSB first, is already byte p / 8's bit p % 8 in memory.
  if (bytes > 0) std::memcpy(out->bitmap.data(), words.data(), bytes);
#else
  for (size_t b = 0; b < bytes; ++b) {
    out->bitmap[b] = static_cast<uint8_t>(words[b / 8] >> (8 * (b % 8)));
  }
#endif
  out->count = agg.occupied();
  const size_t rowBytes = static_cast<size_t>(agg.rowSize()) * dataTypeSize(agg.dtype());
  out->values.resize(static_cast<size_t>(out->count) * rowBytes);

  dispatchDataType(agg.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* dst = reinterpret_cast<T*>(out->values.data());
    const int64_t rowSize = agg.rowSize();
    agg.forEachOccupiedRow<AccumulatorT<T>>([&](const AccumulatorT<T>* row) {
      scaleRow<T>(row, rowSize, scale, dst);
      dst += rowSize;
    });
  });
  return Status::ok();
}

Status decodeToDense(const IndexMap& map,
                     uint32_t part,
                     const uint8_t* bitmap,
                     size_t bitmapBytes,
                     const void* values,
                     size_t valueBytes,
                     DataType dtype,
                     int64_t rowSize,
                     const DenseView& out) {
  ZEN_CHECK_ARG(rowSize >= 1, "row size must be at least 1, got {}", rowSize);
  ZEN_CHECK_ARG(out.device.kind == Device::Kind::kCpu, "decodeToDense writes CPU memory, not {}",
                out.device.toString());
  ZEN_CHECK_ARG(out.dtype == dtype, "output has dtype {}, the payload {}", dataTypeName(out.dtype),
                dataTypeName(dtype));
  ZEN_CHECK_ARG(static_cast<uint64_t>(out.numRows()) == map.numRows() && out.rowSize() == rowSize,
                "output is {} rows x {}, expected {} x {}", out.numRows(), out.rowSize(),
                map.numRows(), rowSize);
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  ZEN_ASSIGN_OR_RETURN(const int64_t count,
                       checkPayload(map, part, bitmap, bitmapBytes, values, valueBytes, rowBytes));
  if (count == 0) return Status::ok();
  ZEN_CHECK_ARG(out.data != nullptr, "output for {} decoded rows has no buffer", count);
  auto* dst = static_cast<std::byte*>(out.data);
  const auto* src = static_cast<const std::byte*>(values);
  forEachSetBitIndex(
      map, part, bitmap, bitmapBytes, [&](const uint64_t* idx, size_t n, int64_t first) {
        copyRowsTo(dst, idx, src + static_cast<size_t>(first) * rowBytes, n, rowBytes);
      });
  return Status::ok();
}

Status decodeToSparse(const IndexMap& map,
                      uint32_t part,
                      const uint8_t* bitmap,
                      size_t bitmapBytes,
                      const void* values,
                      size_t valueBytes,
                      DataType dtype,
                      int64_t rowSize,
                      SparseTensor* out) {
  ZEN_CHECK_ARG(out != nullptr, "decodeToSparse needs an output");
  ZEN_CHECK_ARG(rowSize >= 1, "row size must be at least 1, got {}", rowSize);
  const bool empty = out->indices.empty() && out->values.empty();
  if (!empty) {
    ZEN_CHECK_ARG(static_cast<uint64_t>(out->numRows) == map.numRows() && out->rowSize == rowSize &&
                      out->dtype == dtype,
                  "output holds {} rows x {} of {}, the payload {} x {} of {}", out->numRows,
                  out->rowSize, dataTypeName(out->dtype), map.numRows(), rowSize,
                  dataTypeName(dtype));
  }
  const size_t rowBytes = static_cast<size_t>(rowSize) * dataTypeSize(dtype);
  ZEN_ASSIGN_OR_RETURN(const int64_t count,
                       checkPayload(map, part, bitmap, bitmapBytes, values, valueBytes, rowBytes));
  if (empty) {
    out->numRows = static_cast<int64_t>(map.numRows());
    out->rowSize = rowSize;
    out->dtype = dtype;
  }
  const size_t first = out->indices.size();
  out->indices.resize(first + static_cast<size_t>(count));
  int64_t* idx = out->indices.data() + first;
  forEachSetBitIndex(map, part, bitmap, bitmapBytes,
                     [&](const uint64_t* batch, size_t n, int64_t /*first*/) {
                       for (size_t i = 0; i < n; ++i) *idx++ = static_cast<int64_t>(batch[i]);
                     });
  const size_t valueStart = out->values.size();
  out->values.resize(valueStart + valueBytes);
  if (valueBytes > 0) std::memcpy(out->values.data() + valueStart, values, valueBytes);
  return Status::ok();
}

}  // namespace zen
