// Encoders and the validating decoder of HC's merged sets (layout in the header).
//
// Decoding order: buffer and format sane -> whole header, known form, zero reserved bytes ->
// count against numRows and against the size (overflow-checked) -> exact size -> contents
// (indices ascending and in range; bitmap padding zero; unoccupied dense rows zero).
#include "ops/hc_wire.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/byte_io.h"

namespace zen::ops {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the HC messages are little-endian");

uint8_t* writeHeader(uint8_t form, uint64_t count, size_t bytes, ByteVector* out) {
  out->clear();
  out->resize(bytes, 0);
  uint8_t* p = out->data();
  p[0] = form;
  std::memcpy(p + 8, &count, sizeof(count));
  return p;
}

bool allZero(const uint8_t* begin, size_t bytes) {
  return std::all_of(begin, begin + bytes, [](uint8_t b) { return b == 0; });
}

// The format itself is the caller's, but a dense set of it must be addressable.
Status checkFormat(const HcSetFormat& f) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  ZEN_CHECK_ARG(f.numRows >= 0 && f.rowSize >= 1 && f.valueBytes >= 1,
                "hc set format: {} rows of {} values of {} bytes", f.numRows, f.rowSize,
                f.valueBytes);
  const auto rows = static_cast<size_t>(f.numRows);
  const auto rowSize = static_cast<size_t>(f.rowSize);
  const bool fits = rowSize <= kMax / f.valueBytes &&
                    (rows == 0 || f.rowBytes() <= (kMax - kHcHeaderBytes - f.bitmapBytes()) / rows);
  ZEN_CHECK_ARG(fits, "hc set format: a dense set of {} rows of {} x {} bytes overflows size_t",
                f.numRows, f.rowSize, f.valueBytes);
  return Status::ok();
}

Status checkDense(const uint8_t* data, size_t size, uint64_t count, const HcSetFormat& f) {
  const auto numRows = static_cast<uint64_t>(f.numRows);
  ZEN_CHECK_ARG(count == numRows, "hc dense set: {} rows, expected all {}", count, numRows);
  ZEN_CHECK_ARG(size == f.denseBytes(), "hc dense set of {} rows must be {} bytes, got {} ({})",
                count, f.denseBytes(), size,
                size < f.denseBytes() ? "truncated" : "trailing bytes");
  const uint8_t* bitmap = data + kHcHeaderBytes;
  const size_t bitmapBytes = f.bitmapBytes();
  if (numRows % 8 != 0) {
    const uint8_t padding = bitmap[bitmapBytes - 1] >> (numRows % 8);
    ZEN_CHECK_ARG(padding == 0, "hc dense set: bitmap bits past row {} are set (0x{:02x})", numRows,
                  padding);
  }
  const uint8_t* values = bitmap + bitmapBytes;
  const size_t rowBytes = f.rowBytes();
  for (uint64_t r = 0; r < numRows; ++r) {
    if ((bitmap[r / 8] >> (r % 8)) & 1) continue;
    ZEN_CHECK_ARG(allZero(values + r * rowBytes, rowBytes),
                  "hc dense set: row {} is not in the bitmap but has non-zero values", r);
  }
  return Status::ok();
}

Status checkSparse(const HcSetView& v, size_t size, const HcSetFormat& f) {
  const auto numRows = static_cast<uint64_t>(f.numRows);
  ZEN_CHECK_ARG(v.count <= numRows, "hc sparse set claims {} rows, the tensor has {}", v.count,
                numRows);
  const size_t perRow = f.indexBytes() + f.rowBytes();
  const size_t body = size - kHcHeaderBytes;
  ZEN_CHECK_ARG(v.count <= body / perRow,
                "hc sparse set truncated: {} rows of {} bytes claimed, {} bytes after the header",
                v.count, perRow, body);
  ZEN_CHECK_ARG(body == v.count * perRow,
                "hc sparse set of {} rows must be {} bytes, got {} (trailing bytes)", v.count,
                kHcHeaderBytes + v.count * perRow, size);
  int64_t previous = -1;
  for (uint64_t k = 0; k < v.count; ++k) {
    const int64_t index = v.index(k);
    ZEN_CHECK_ARG(index > previous && index < f.numRows,
                  "hc sparse set: row {} is index {} after {} (expected ascending indices in "
                  "[0, {}))",
                  k, index, previous, f.numRows);
    previous = index;
  }
  return Status::ok();
}

}  // namespace

void encodeHcSparse(const HcSetFormat& format,
                    const int64_t* indices,
                    const void* values,
                    uint64_t count,
                    ByteVector* out) {
  uint8_t* p = writeHeader(kHcSparseForm, count, format.sparseBytes(count), out);
  p += kHcHeaderBytes;
  const auto n = static_cast<size_t>(count);
  if (format.indexBytes() == 4) {
    for (size_t k = 0; k < n; ++k) {
      const auto index = static_cast<uint32_t>(indices[k]);
      std::memcpy(p + 4 * k, &index, 4);
    }
  } else if (n > 0) {
    std::memcpy(p, indices, n * 8);
  }
  if (n > 0) std::memcpy(p + n * format.indexBytes(), values, n * format.rowBytes());
}

void encodeHcDense(const HcSetFormat& format,
                   const uint64_t* occupancy,
                   const void* values,
                   ByteVector* out) {
  const auto numRows = static_cast<uint64_t>(format.numRows);
  uint8_t* p = writeHeader(kHcDenseForm, numRows, format.denseBytes(), out);
  p += kHcHeaderBytes;
  const size_t bitmapBytes = format.bitmapBytes();
  for (size_t b = 0; b < bitmapBytes; ++b) {
    p[b] = static_cast<uint8_t>(occupancy[b / 8] >> (8 * (b % 8)));
  }
  const size_t valueBytes = static_cast<size_t>(numRows) * format.rowBytes();
  if (valueBytes > 0) std::memcpy(p + bitmapBytes, values, valueBytes);
}

int64_t HcSetView::index(uint64_t k) const {
  return indexBytes == 4 ? static_cast<int64_t>(loadAt<uint32_t>(indices, k))
                         : loadAt<int64_t>(indices, k);
}

Result<HcSetView> decodeHcSet(const uint8_t* data, size_t size, const HcSetFormat& format) {
  ZEN_CHECK_ARG(data != nullptr || size == 0, "hc set: null buffer of {} bytes", size);
  ZEN_RETURN_IF_ERROR(checkFormat(format));
  ZEN_CHECK_ARG(size >= kHcHeaderBytes, "hc set truncated: {} bytes, not even the {}-byte header",
                size, kHcHeaderBytes);
  ZEN_CHECK_ARG(data[0] == kHcSparseForm || data[0] == kHcDenseForm,
                "hc set: unknown form byte {}, expected {} (sparse) or {} (dense)", data[0],
                kHcSparseForm, kHcDenseForm);
  ZEN_CHECK_ARG(allZero(data + 1, 7), "hc set: reserved header bytes 1-7 are not zero");
  HcSetView v;
  v.dense = data[0] == kHcDenseForm;
  v.count = loadAt<uint64_t>(data + 8, 0);
  if (v.dense) {
    ZEN_RETURN_IF_ERROR(checkDense(data, size, v.count, format));
    v.bitmap = data + kHcHeaderBytes;
    v.values = v.bitmap + format.bitmapBytes();
    return v;
  }
  v.indexBytes = format.indexBytes();
  v.indices = data + kHcHeaderBytes;
  ZEN_RETURN_IF_ERROR(checkSparse(v, size, format));
  v.values = v.indices + static_cast<size_t>(v.count) * v.indexBytes;
  return v;
}

}  // namespace zen::ops
