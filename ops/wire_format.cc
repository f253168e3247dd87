// Encoders and validating decoders of the sparse allreduce payloads (layouts in the header).
//
// Decoding order, for every kind: header present and aligned -> magic, version, kind, dtype,
// row size -> count against the caller's maximum and against what the size can hold -> exact
// size -> array contents. Only the last step reads past the fixed fields, and nothing is ever
// allocated from a payload's numbers (the call summary's message is bounded first).
#include "ops/wire_format.h"

#include <algorithm>
#include <cstring>

#include "core/bitmap_popcount.h"

namespace zen::ops {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

constexpr size_t kCallInfoBody = 40;
constexpr uint8_t kFailedFlag = 1;
constexpr uint8_t kDenseOutputFlag = 2;

size_t roundUp8(size_t x) {
  return (x + kWireAlignment - 1) / kWireAlignment * kWireAlignment;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

struct Header {
  PayloadKind kind;
  DataType dtype;
  uint32_t rowSize;
  uint64_t count;
};

// Sizes `out` to `at + bytes` and writes the header at byte `at` (the bytes before it kept). Bytes
// past the header are left for the caller except the padding, which the start* functions zero.
uint8_t* writeHeader(PayloadKind kind,
                     DataType dtype,
                     int64_t rowSize,
                     uint64_t count,
                     size_t bytes,
                     ByteVector* out,
                     size_t at = 0) {
  out->resize(at + bytes);
  uint8_t* p = out->data() + at;
  p[0] = kWireMagic;
  p[1] = kWireVersion;
  p[2] = static_cast<uint8_t>(kind);
  p[3] = static_cast<uint8_t>(dtype);
  store<uint32_t>(p + 4, static_cast<uint32_t>(rowSize));
  store<uint64_t>(p + 8, count);
  return p;
}

Result<Header> readHeader(const uint8_t* data, size_t size, PayloadKind expected) {
  const char* name = payloadKindName(expected);
  ZEN_CHECK_ARG(data != nullptr || size == 0, "{} payload: null buffer of {} bytes", name, size);
  ZEN_CHECK_ARG(size >= kWireHeaderBytes,
                "{} payload truncated: {} bytes, not even the {}-byte header", name, size,
                kWireHeaderBytes);
  ZEN_CHECK_ARG(reinterpret_cast<uintptr_t>(data) % kWireAlignment == 0,
                "{} payload buffer is not {}-byte aligned", name, kWireAlignment);
  ZEN_CHECK_ARG(data[0] == kWireMagic && data[1] == kWireVersion,
                "{} payload: bad magic/version 0x{:02x}/{}, expected 0x{:02x}/{} (garbage, or a "
                "peer running another Zen version)",
                name, data[0], data[1], kWireMagic, kWireVersion);
  ZEN_CHECK_ARG(data[2] == static_cast<uint8_t>(expected), "expected a {} payload, got kind {}",
                name, data[2]);
  ZEN_CHECK_ARG(data[3] <= static_cast<uint8_t>(DataType::kInt64),
                "{} payload: unknown dtype code {}", name, data[3]);
  Header h;
  h.kind = expected;
  h.dtype = static_cast<DataType>(data[3]);
  h.rowSize = load<uint32_t>(data + 4);
  h.count = load<uint64_t>(data + 8);
  return h;
}

Status checkFormat(const Header& h, const RowFormat& format) {
  const char* name = payloadKindName(h.kind);
  ZEN_CHECK_ARG(format.rowSize >= 1 && format.rowSize <= kMaxWireRowSize,
                "{} payload: expected row size {} is outside [1, {}]", name, format.rowSize,
                kMaxWireRowSize);
  ZEN_CHECK_ARG(h.dtype == format.dtype && h.rowSize == static_cast<uint64_t>(format.rowSize),
                "{} payload carries rows of {} x {}, expected {} x {}", name, h.rowSize,
                dataTypeName(h.dtype), format.rowSize, dataTypeName(format.dtype));
  return Status::ok();
}

// count <= maxCount, and count entries of `perEntry` bytes fit in what follows `fixed`.
Status checkCount(const Header& h, uint64_t maxCount, size_t size, size_t fixed, size_t perEntry) {
  const char* name = payloadKindName(h.kind);
  ZEN_CHECK_ARG(h.count <= maxCount, "{} payload claims {} entries, at most {} expected", name,
                h.count, maxCount);
  const size_t room = size >= fixed ? size - fixed : 0;
  ZEN_CHECK_ARG(h.count <= room / perEntry,
                "{} payload truncated: {} entries of {} bytes claimed, {} bytes after its fixed "
                "part",
                name, h.count, perEntry, room);
  return Status::ok();
}

Status checkExactSize(const Header& h, size_t size, size_t expected) {
  ZEN_CHECK_ARG(size == expected, "{} payload of {} entries must be {} bytes, got {} ({})",
                payloadKindName(h.kind), h.count, expected, size,
                size < expected ? "truncated" : "trailing bytes");
  return Status::ok();
}

Status checkZero(const Header& h, const uint8_t* begin, const uint8_t* end) {
  ZEN_CHECK_ARG(std::all_of(begin, end, [](uint8_t b) { return b == 0; }),
                "{} payload has non-zero padding", payloadKindName(h.kind));
  return Status::ok();
}

// Layout of "count x u32 | pad | count x rowBytes" bodies (positions, block ids).
size_t u32ArrayEnd(int64_t count) {
  return kWireHeaderBytes + roundUp8(static_cast<size_t>(count) * 4);
}

}  // namespace

const char* payloadKindName(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kCounts:
      return "counts";
    case PayloadKind::kCooIndices:
      return "COO (indices)";
    case PayloadKind::kCooPositions:
      return "COO (positions)";
    case PayloadKind::kBitmap:
      return "hash-bitmap";
    case PayloadKind::kDenseRange:
      return "dense-range";
    case PayloadKind::kBlocks:
      return "blocks";
    case PayloadKind::kCallInfo:
      return "call-info";
    case PayloadKind::kEliasFano:
      return "Elias-Fano";
  }
  return "unknown";
}

Result<PayloadKind> peekPayloadKind(const uint8_t* data, size_t size) {
  ZEN_CHECK_ARG(data != nullptr && size >= kWireHeaderBytes,
                "payload truncated: {} bytes, not even the {}-byte header", size, kWireHeaderBytes);
  ZEN_CHECK_ARG(data[0] == kWireMagic && data[1] == kWireVersion,
                "payload: bad magic/version 0x{:02x}/{}", data[0], data[1]);
  ZEN_CHECK_ARG(data[2] >= static_cast<uint8_t>(PayloadKind::kCounts) &&
                    data[2] <= static_cast<uint8_t>(PayloadKind::kEliasFano),
                "payload: unknown kind {}", data[2]);
  return static_cast<PayloadKind>(data[2]);
}

// --- counts ------------------------------------------------------------------------------------

void encodeCounts(const uint64_t* counts, size_t n, ByteVector* out) {
  uint8_t* p =
      writeHeader(PayloadKind::kCounts, DataType::kInt64, 1, n, kWireHeaderBytes + n * 8, out);
  if (n > 0) std::memcpy(p + kWireHeaderBytes, counts, n * 8);
}

Status decodeCounts(
    const uint8_t* data, size_t size, size_t n, uint64_t maxCount, std::vector<uint64_t>* out) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kCounts));
  ZEN_CHECK_ARG(h.count == n, "counts payload holds {} counts, expected one per rank: {}", h.count,
                n);
  ZEN_RETURN_IF_ERROR(checkCount(h, n, size, kWireHeaderBytes, 8));
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, kWireHeaderBytes + n * 8));
  for (size_t p = 0; p < n; ++p) {
    const uint64_t c = load<uint64_t>(data + kWireHeaderBytes + p * 8);
    ZEN_CHECK_ARG(c <= maxCount, "counts payload: count {} for rank {} exceeds the maximum {}", c,
                  p, maxCount);
  }
  out->resize(n);
  if (n > 0) std::memcpy(out->data(), data + kWireHeaderBytes, n * 8);
  return Status::ok();
}

// --- COO with indices --------------------------------------------------------------------------

size_t cooIndicesBytes(int64_t count, size_t rowBytes) {
  return kWireHeaderBytes + static_cast<size_t>(count) * (8 + rowBytes);
}

CooIndicesSlots startCooIndices(const RowFormat& format,
                                int64_t count,
                                ByteVector* out,
                                size_t at) {
  uint8_t* p =
      writeHeader(PayloadKind::kCooIndices, format.dtype, format.rowSize,
                  static_cast<uint64_t>(count), cooIndicesBytes(count, format.rowBytes()), out, at);
  return {reinterpret_cast<int64_t*>(p + kWireHeaderBytes),
          reinterpret_cast<std::byte*>(p + kWireHeaderBytes + static_cast<size_t>(count) * 8)};
}

void encodeCooIndices(const RowFormat& format,
                      const int64_t* indices,
                      const void* values,
                      int64_t count,
                      ByteVector* out,
                      size_t at) {
  const CooIndicesSlots slots = startCooIndices(format, count, out, at);
  if (count == 0) return;
  std::memcpy(slots.indices, indices, static_cast<size_t>(count) * 8);
  std::memcpy(slots.values, values, static_cast<size_t>(count) * format.rowBytes());
}

Result<CooIndicesView> decodeCooIndices(
    const uint8_t* data, size_t size, const RowFormat& format, int64_t numRows, int64_t maxCount) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kCooIndices));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  const size_t rowBytes = format.rowBytes();
  ZEN_RETURN_IF_ERROR(checkCount(h, static_cast<uint64_t>(std::max<int64_t>(maxCount, 0)), size,
                                 kWireHeaderBytes, 8 + rowBytes));
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, cooIndicesBytes(count, rowBytes)));
  CooIndicesView v;
  v.count = count;
  v.indices = reinterpret_cast<const int64_t*>(data + kWireHeaderBytes);
  v.values = reinterpret_cast<const std::byte*>(data + kWireHeaderBytes + h.count * 8);
  for (int64_t i = 0; i < count; ++i) {
    ZEN_CHECK_ARG(v.indices[i] >= 0 && v.indices[i] < numRows,
                  "COO (indices) payload: entry {} has index {}, outside [0, {})", i, v.indices[i],
                  numRows);
  }
  return v;
}

// --- COO with local positions ------------------------------------------------------------------

size_t cooPositionsBytes(int64_t count, size_t rowBytes) {
  return u32ArrayEnd(count) + static_cast<size_t>(count) * rowBytes;
}

CooPositionsSlots startCooPositions(const RowFormat& format,
                                    int64_t count,
                                    ByteVector* out,
                                    size_t at) {
  uint8_t* p = writeHeader(PayloadKind::kCooPositions, format.dtype, format.rowSize,
                           static_cast<uint64_t>(count),
                           cooPositionsBytes(count, format.rowBytes()), out, at);
  const size_t end = kWireHeaderBytes + static_cast<size_t>(count) * 4;
  std::memset(p + end, 0, u32ArrayEnd(count) - end);
  return {reinterpret_cast<uint32_t*>(p + kWireHeaderBytes),
          reinterpret_cast<std::byte*>(p + u32ArrayEnd(count))};
}

void encodeCooPositions(const RowFormat& format,
                        const uint32_t* positions,
                        const void* values,
                        int64_t count,
                        ByteVector* out,
                        size_t at) {
  const CooPositionsSlots slots = startCooPositions(format, count, out, at);
  if (count == 0) return;
  std::memcpy(slots.positions, positions, static_cast<size_t>(count) * 4);
  std::memcpy(slots.values, values, static_cast<size_t>(count) * format.rowBytes());
}

Result<CooPositionsView> decodeCooPositions(const uint8_t* data,
                                            size_t size,
                                            const RowFormat& format,
                                            uint64_t bound,
                                            int64_t maxCount,
                                            bool strictlyAscending) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kCooPositions));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  const size_t rowBytes = format.rowBytes();
  ZEN_RETURN_IF_ERROR(checkCount(h, static_cast<uint64_t>(std::max<int64_t>(maxCount, 0)), size,
                                 kWireHeaderBytes, 4 + rowBytes));
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, cooPositionsBytes(count, rowBytes)));
  ZEN_RETURN_IF_ERROR(
      checkZero(h, data + kWireHeaderBytes + h.count * 4, data + u32ArrayEnd(count)));
  CooPositionsView v;
  v.count = count;
  v.positions = reinterpret_cast<const uint32_t*>(data + kWireHeaderBytes);
  v.values = reinterpret_cast<const std::byte*>(data + u32ArrayEnd(count));
  for (int64_t i = 0; i < count; ++i) {
    ZEN_CHECK_ARG(v.positions[i] < bound,
                  "COO (positions) payload: entry {} has position {}, the part has {}", i,
                  v.positions[i], bound);
    ZEN_CHECK_ARG(!strictlyAscending || i == 0 || v.positions[i] > v.positions[i - 1],
                  "COO (positions) payload: positions not strictly ascending at entry {}", i);
  }
  return v;
}

// --- hash-bitmap part --------------------------------------------------------------------------

size_t bitmapPartBytes(uint64_t bits, int64_t count, size_t rowBytes) {
  return kWireHeaderBytes + 8 + roundUp8(static_cast<size_t>((bits + 7) / 8)) +
         static_cast<size_t>(count) * rowBytes;
}

BitmapPartSlots startBitmapPart(const RowFormat& format,
                                uint64_t bits,
                                int64_t count,
                                ByteVector* out) {
  uint8_t* p =
      writeHeader(PayloadKind::kBitmap, format.dtype, format.rowSize, static_cast<uint64_t>(count),
                  bitmapPartBytes(bits, count, format.rowBytes()), out);
  store<uint64_t>(p + kWireHeaderBytes, bits);
  uint8_t* bitmap = p + kWireHeaderBytes + 8;
  const size_t bitmapBytes = static_cast<size_t>((bits + 7) / 8);
  std::memset(bitmap, 0, roundUp8(bitmapBytes));
  return {bitmap, reinterpret_cast<std::byte*>(bitmap + roundUp8(bitmapBytes))};
}

void encodeBitmapPart(const RowFormat& format,
                      const uint8_t* bitmap,
                      uint64_t bits,
                      const void* values,
                      int64_t count,
                      ByteVector* out) {
  const BitmapPartSlots slots = startBitmapPart(format, bits, count, out);
  const size_t bitmapBytes = static_cast<size_t>((bits + 7) / 8);
  if (bitmapBytes > 0) std::memcpy(slots.bitmap, bitmap, bitmapBytes);
  if (count > 0) std::memcpy(slots.values, values, static_cast<size_t>(count) * format.rowBytes());
}

Result<BitmapPartView> decodeBitmapPart(const uint8_t* data,
                                        size_t size,
                                        const RowFormat& format,
                                        uint64_t expectedBits) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kBitmap));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  ZEN_CHECK_ARG(size >= kWireHeaderBytes + 8, "hash-bitmap payload truncated: {} bytes", size);
  const uint64_t bits = load<uint64_t>(data + kWireHeaderBytes);
  ZEN_CHECK_ARG(bits == expectedBits, "hash-bitmap payload has {} bits, the part has {}", bits,
                expectedBits);
  const size_t bitmapBytes = static_cast<size_t>((bits + 7) / 8);
  const size_t fixed = kWireHeaderBytes + 8 + roundUp8(bitmapBytes);
  ZEN_RETURN_IF_ERROR(checkCount(h, bits, size, fixed, format.rowBytes()));
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, bitmapPartBytes(bits, count, format.rowBytes())));
  const uint8_t* bitmap = data + kWireHeaderBytes + 8;
  ZEN_RETURN_IF_ERROR(checkZero(h, bitmap + bitmapBytes, data + fixed));
  if (bits % 8 != 0) {
    ZEN_CHECK_ARG((bitmap[bitmapBytes - 1] >> (bits % 8)) == 0,
                  "hash-bitmap payload has bits set past its {} positions", bits);
  }
  const auto set = static_cast<int64_t>(bitmapPopcount(bitmap, bitmapBytes));
  ZEN_CHECK_ARG(set == count, "hash-bitmap payload has {} set bits but {} rows", set, count);
  BitmapPartView v;
  v.bits = bits;
  v.bitmap = bitmap;
  v.bitmapBytes = bitmapBytes;
  v.count = count;
  v.values = reinterpret_cast<const std::byte*>(data + fixed);
  return v;
}

// --- Elias-Fano part ---------------------------------------------------------------------------

namespace {

// Offsets of the part's arrays: low bits, bitvector, rows.
struct EliasFanoLayout {
  size_t low;
  size_t high;
  size_t values;
};
EliasFanoLayout eliasFanoLayout(const EliasFanoShape& s) {
  const size_t low = kWireHeaderBytes + 8;
  const size_t high = low + roundUp8(s.lowBytes);
  return {low, high, high + roundUp8(s.highBytes)};
}

}  // namespace

size_t eliasFanoPartBytes(uint64_t universe, int64_t count, size_t rowBytes) {
  const EliasFanoShape s = eliasFanoShape(universe, static_cast<uint64_t>(count));
  return eliasFanoLayout(s).values + static_cast<size_t>(count) * rowBytes;
}

EliasFanoPartSlots startEliasFanoPart(const RowFormat& format,
                                      uint64_t universe,
                                      int64_t count,
                                      ByteVector* out) {
  const EliasFanoShape s = eliasFanoShape(universe, static_cast<uint64_t>(count));
  const EliasFanoLayout at = eliasFanoLayout(s);
  uint8_t* p = writeHeader(PayloadKind::kEliasFano, format.dtype, format.rowSize,
                           static_cast<uint64_t>(count),
                           at.values + static_cast<size_t>(count) * format.rowBytes(), out);
  store<uint64_t>(p + kWireHeaderBytes, universe);
  std::memset(p + at.low, 0, at.values - at.low);  // the writer ORs its bits in
  return {EliasFanoWriter(s, p + at.low, p + at.high), reinterpret_cast<std::byte*>(p + at.values)};
}

Result<EliasFanoPartView> decodeEliasFanoPart(const uint8_t* data,
                                              size_t size,
                                              const RowFormat& format,
                                              uint64_t expectedUniverse,
                                              std::vector<uint32_t>* positions) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kEliasFano));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  ZEN_CHECK_ARG(size >= kWireHeaderBytes + 8, "Elias-Fano payload truncated: {} bytes", size);
  const uint64_t universe = load<uint64_t>(data + kWireHeaderBytes);
  // Universes past 2^32 (positions are 32-bit) are decodeEliasFano's to refuse.
  ZEN_CHECK_ARG(universe == expectedUniverse,
                "Elias-Fano payload has a universe of {} positions, the part has {}", universe,
                expectedUniverse);
  ZEN_RETURN_IF_ERROR(checkCount(h, universe, size, kWireHeaderBytes + 8, format.rowBytes()));
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(
      checkExactSize(h, size, eliasFanoPartBytes(universe, count, format.rowBytes())));
  const EliasFanoShape s = eliasFanoShape(universe, h.count);
  const EliasFanoLayout at = eliasFanoLayout(s);
  ZEN_RETURN_IF_ERROR(checkZero(h, data + at.low + s.lowBytes, data + at.high));
  ZEN_RETURN_IF_ERROR(checkZero(h, data + at.high + s.highBytes, data + at.values));
  positions->resize(static_cast<size_t>(count));
  ZEN_RETURN_IF_ERROR(
      decodeEliasFano(s, data + at.low, data + at.high, universe, h.count, positions->data()));
  EliasFanoPartView v;
  v.universe = universe;
  v.shape = s;
  v.low = data + at.low;
  v.high = data + at.high;
  v.count = count;
  v.positions = positions->data();
  v.values = reinterpret_cast<const std::byte*>(data + at.values);
  return v;
}

// --- dense range -------------------------------------------------------------------------------

size_t denseRangeBytes(int64_t count, size_t rowBytes) {
  return kWireHeaderBytes + 8 + static_cast<size_t>(count) * rowBytes;
}

std::byte* startDenseRange(const RowFormat& format,
                           uint64_t begin,
                           int64_t count,
                           ByteVector* out) {
  uint8_t* p =
      writeHeader(PayloadKind::kDenseRange, format.dtype, format.rowSize,
                  static_cast<uint64_t>(count), denseRangeBytes(count, format.rowBytes()), out);
  store<uint64_t>(p + kWireHeaderBytes, begin);
  return reinterpret_cast<std::byte*>(p + kWireHeaderBytes + 8);
}

void encodeDenseRange(
    const RowFormat& format, uint64_t begin, const void* values, int64_t count, ByteVector* out) {
  std::byte* dst = startDenseRange(format, begin, count, out);
  if (count > 0) std::memcpy(dst, values, static_cast<size_t>(count) * format.rowBytes());
}

Result<DenseRangeView> decodeDenseRange(const uint8_t* data,
                                        size_t size,
                                        const RowFormat& format,
                                        uint64_t limit) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kDenseRange));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  ZEN_CHECK_ARG(size >= kWireHeaderBytes + 8, "dense-range payload truncated: {} bytes", size);
  const uint64_t begin = load<uint64_t>(data + kWireHeaderBytes);
  ZEN_RETURN_IF_ERROR(checkCount(h, limit, size, kWireHeaderBytes + 8, format.rowBytes()));
  ZEN_CHECK_ARG(begin <= limit - h.count, "dense-range payload covers rows [{}, {} + {}), past {}",
                begin, begin, h.count, limit);
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, denseRangeBytes(count, format.rowBytes())));
  DenseRangeView v;
  v.begin = begin;
  v.count = count;
  v.values = reinterpret_cast<const std::byte*>(data + kWireHeaderBytes + 8);
  return v;
}

// --- blocks ------------------------------------------------------------------------------------

size_t blocksBytes(int64_t count, size_t blockBytes) {
  return u32ArrayEnd(count) + static_cast<size_t>(count) * blockBytes;
}

BlocksSlots startBlocks(const RowFormat& format, int64_t count, ByteVector* out) {
  uint8_t* p =
      writeHeader(PayloadKind::kBlocks, format.dtype, format.rowSize, static_cast<uint64_t>(count),
                  blocksBytes(count, format.rowBytes()), out);
  const size_t end = kWireHeaderBytes + static_cast<size_t>(count) * 4;
  std::memset(p + end, 0, u32ArrayEnd(count) - end);
  return {reinterpret_cast<uint32_t*>(p + kWireHeaderBytes),
          reinterpret_cast<std::byte*>(p + u32ArrayEnd(count))};
}

void encodeBlocks(const RowFormat& format,
                  const uint32_t* ids,
                  const void* values,
                  int64_t count,
                  ByteVector* out) {
  const BlocksSlots slots = startBlocks(format, count, out);
  if (count == 0) return;
  std::memcpy(slots.ids, ids, static_cast<size_t>(count) * 4);
  std::memcpy(slots.values, values, static_cast<size_t>(count) * format.rowBytes());
}

Result<BlocksView> decodeBlocks(const uint8_t* data,
                                size_t size,
                                const RowFormat& format,
                                uint64_t numBlocks) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kBlocks));
  ZEN_RETURN_IF_ERROR(checkFormat(h, format));
  ZEN_CHECK_ARG(numBlocks <= (uint64_t{1} << 32), "{} blocks do not fit 32-bit block ids",
                numBlocks);
  ZEN_RETURN_IF_ERROR(checkCount(h, numBlocks, size, kWireHeaderBytes, 4 + format.rowBytes()));
  const auto count = static_cast<int64_t>(h.count);
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, blocksBytes(count, format.rowBytes())));
  ZEN_RETURN_IF_ERROR(
      checkZero(h, data + kWireHeaderBytes + h.count * 4, data + u32ArrayEnd(count)));
  BlocksView v;
  v.count = count;
  v.ids = reinterpret_cast<const uint32_t*>(data + kWireHeaderBytes);
  v.values = reinterpret_cast<const std::byte*>(data + u32ArrayEnd(count));
  for (int64_t i = 0; i < count; ++i) {
    ZEN_CHECK_ARG(v.ids[i] < numBlocks, "blocks payload: entry {} has block id {}, only {} blocks",
                  i, v.ids[i], numBlocks);
    ZEN_CHECK_ARG(i == 0 || v.ids[i] > v.ids[i - 1],
                  "blocks payload: block ids not strictly ascending at entry {}", i);
  }
  return v;
}

// --- call summary ------------------------------------------------------------------------------

void encodeCallInfo(const CallInfo& info, ByteVector* out) {
  const size_t messageBytes = std::min(info.message.size(), kMaxCallMessageBytes);
  const DataType dtype =
      info.dtype <= DataType::kInt64 ? info.dtype : DataType::kFloat32;  // failed calls only
  uint8_t* p = writeHeader(PayloadKind::kCallInfo, dtype, 1, messageBytes,
                           kWireHeaderBytes + kCallInfoBody + messageBytes, out);
  uint8_t* body = p + kWireHeaderBytes;
  store<int32_t>(body, info.rank);
  body[4] = static_cast<uint8_t>(info.op);
  body[5] = static_cast<uint8_t>(info.scheme);
  body[6] = static_cast<uint8_t>((info.failed ? kFailedFlag : 0) |
                                 (info.denseOutput ? kDenseOutputFlag : 0));
  body[7] = 0;
  store<int64_t>(body + 8, info.rowSize);
  store<int64_t>(body + 16, info.numRows);
  store<int64_t>(body + 24, info.nnz);
  store<uint64_t>(body + 32, info.seed);
  if (messageBytes > 0) std::memcpy(body + kCallInfoBody, info.message.data(), messageBytes);
}

size_t startSummarized(const CallInfo& info, ByteVector* out) {
  encodeCallInfo(info, out);
  out->resize(roundUp8(out->size()), 0);
  return out->size();
}

Result<SummarizedView> decodeSummarized(const uint8_t* data, size_t size, int expectedRank) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kCallInfo));
  ZEN_RETURN_IF_ERROR(
      checkCount(h, kMaxCallMessageBytes, size, kWireHeaderBytes + kCallInfoBody, 1));
  const size_t summary = kWireHeaderBytes + kCallInfoBody + h.count;
  const size_t padded = roundUp8(summary);
  ZEN_CHECK_ARG(size >= padded,
                "call-info payload of {} message bytes is not padded to {}: {} bytes", h.count,
                padded, size);
  ZEN_RETURN_IF_ERROR(checkZero(h, data + summary, data + padded));
  SummarizedView v;
  ZEN_ASSIGN_OR_RETURN(v.info, decodeCallInfo(data, summary, expectedRank));
  v.payload = data + padded;
  v.payloadBytes = size - padded;
  return v;
}

Result<CallInfo> decodeCallInfo(const uint8_t* data, size_t size, int expectedRank) {
  ZEN_ASSIGN_OR_RETURN(const Header h, readHeader(data, size, PayloadKind::kCallInfo));
  ZEN_CHECK_ARG(h.rowSize == 1, "call-info payload: row-size field {}, expected 1", h.rowSize);
  ZEN_RETURN_IF_ERROR(
      checkCount(h, kMaxCallMessageBytes, size, kWireHeaderBytes + kCallInfoBody, 1));
  ZEN_RETURN_IF_ERROR(checkExactSize(h, size, kWireHeaderBytes + kCallInfoBody + h.count));
  const uint8_t* body = data + kWireHeaderBytes;
  CallInfo info;
  info.rank = load<int32_t>(body);
  ZEN_CHECK_ARG(info.rank == expectedRank, "call-info payload from rank {} says rank {}",
                expectedRank, info.rank);
  ZEN_CHECK_ARG(body[4] <= static_cast<uint8_t>(ReduceOp::kAverage),
                "call-info payload: unknown reduce op {}", body[4]);
  ZEN_CHECK_ARG(body[5] <= static_cast<uint8_t>(Scheme::kDense),
                "call-info payload: unknown scheme {}", body[5]);
  ZEN_CHECK_ARG((body[6] & ~(kFailedFlag | kDenseOutputFlag)) == 0 && body[7] == 0,
                "call-info payload: unknown flags 0x{:02x}{:02x}", body[7], body[6]);
  info.op = static_cast<ReduceOp>(body[4]);
  info.scheme = static_cast<Scheme>(body[5]);
  info.failed = (body[6] & kFailedFlag) != 0;
  info.denseOutput = (body[6] & kDenseOutputFlag) != 0;
  info.dtype = h.dtype;
  info.rowSize = load<int64_t>(body + 8);
  info.numRows = load<int64_t>(body + 16);
  info.nnz = load<int64_t>(body + 24);
  info.seed = load<uint64_t>(body + 32);
  // A failed call's shape may be what made it fail; a healthy one must be sane.
  ZEN_CHECK_ARG(info.failed || (info.rowSize >= 1 && info.numRows >= 0 && info.nnz >= 0),
                "call-info payload from rank {}: {} rows x {}, nnz {}", expectedRank, info.numRows,
                info.rowSize, info.nnz);
  info.message.assign(reinterpret_cast<const char*>(body + kCallInfoBody),
                      static_cast<size_t>(h.count));
  return info;
}

}  // namespace zen::ops
