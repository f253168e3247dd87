#pragma once

// The messages of the HC scheme (ops/sparse_allreduce_hc.cc): one rank's merged set of rows,
// in the accumulator type, sparse or dense. Both forms start with a 16-byte header:
//   u8 form (0 sparse, 1 dense) | 7 zero bytes | u64 count
//   sparse: count indices, strictly ascending in [0, numRows), 4 bytes each (8 when numRows >
//           2^32) | count rows
//   dense:  count = numRows | ceil(numRows / 8)-byte occupancy bitmap, bit r = row r, LSB
//           first, padding bits zero | numRows rows; rows whose bit is clear are all zero bytes
// A row is rowSize values of valueBytes each. Nothing is aligned: the views below hand out byte
// pointers, read with loadAt (ops/byte_io.h). Multi-byte fields are little-endian (host order;
// the library builds for little-endian hosts only).
//
// decodeHcSet never trusts the message: it checks the header, the count against numRows and
// the size it implies (overflow-checked), then every index, the bitmap's padding and the
// unoccupied rows, before returning a view into the caller's buffer. It allocates nothing.
// Every rejection is kInvalidArgument with what was expected and what was found.

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "ops/transport.h"

namespace zen::ops {

// The Transport::sendRecv tag of every hc step (below Transport::kMaxUserTag; the schemes run
// one at a time, so no other call meets it).
inline constexpr uint32_t kHcTag = 0x3c01;

inline constexpr size_t kHcHeaderBytes = 16;
inline constexpr uint8_t kHcSparseForm = 0;
inline constexpr uint8_t kHcDenseForm = 1;

// What both sides agree on: the tensor's rows and the size of one accumulator value.
struct HcSetFormat {
  int64_t numRows = 0;
  int64_t rowSize = 1;    // values per row
  size_t valueBytes = 4;  // sizeof the accumulator type

  size_t rowBytes() const { return static_cast<size_t>(rowSize) * valueBytes; }
  size_t indexBytes() const {
    return static_cast<uint64_t>(numRows) <= (uint64_t{1} << 32) ? 4 : 8;
  }
  size_t bitmapBytes() const { return static_cast<size_t>((numRows + 7) / 8); }
  size_t sparseBytes(uint64_t count) const {
    return kHcHeaderBytes + static_cast<size_t>(count) * (indexBytes() + rowBytes());
  }
  size_t denseBytes() const {
    return kHcHeaderBytes + bitmapBytes() + static_cast<size_t>(numRows) * rowBytes();
  }
};

// count rows: ascending unique indices in [0, numRows), and count x rowBytes values.
void encodeHcSparse(const HcSetFormat& format,
                    const int64_t* indices,
                    const void* values,
                    uint64_t count,
                    ByteVector* out);
// All numRows rows; occupancy is ceil(numRows / 64) words, bit r of word r / 64 = row r, bits
// past numRows clear.
void encodeHcDense(const HcSetFormat& format,
                   const uint64_t* occupancy,
                   const void* values,
                   ByteVector* out);

struct HcSetView {
  bool dense = false;
  uint64_t count = 0;                // sparse: rows sent; dense: numRows
  size_t indexBytes = 4;             // sparse: width of an index
  const uint8_t* indices = nullptr;  // sparse: count indices
  const uint8_t* bitmap = nullptr;   // dense: bitmapBytes()
  const uint8_t* values = nullptr;   // count rows

  int64_t index(uint64_t k) const;  // sparse: the k-th index
};
Result<HcSetView> decodeHcSet(const uint8_t* data, size_t size, const HcSetFormat& format);

}  // namespace zen::ops
