#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dtype.h"
#include "core/elias_fano.h"
#include "core/status.h"
#include "ops/sparse_allreduce.h"
#include "ops/transport.h"

namespace zen::ops {

// The payloads the sparse allreduce schemes put on the wire, and their decoders.
//
// Every payload starts with a 16-byte header, little-endian:
//   u8 magic 'Z' | u8 version | u8 kind | u8 dtype | u32 rowSize | u64 count
// followed by the kind's body. Arrays start at multiples of 8 bytes from the payload's start
// (zero padding between them), so a decoded view can be read in place from any 8-byte aligned
// buffer (every ByteVector a transport returns is). Multi-byte fields are in host order and
// the library builds for little-endian hosts only.
//
// A payload may also follow a call summary in one message (the schemes' first exchange: see
// "a call summary leading a message" below); encoders that take `at` write the payload from
// byte `at` of *out (a multiple of 8), keeping the bytes before it.
//
// Decoders never trust the payload: they check the header, the expected dtype and row size,
// that count is at most what the caller allows, and that the size is exactly what count
// implies (with overflow-checked arithmetic), all before reading any array; then the array
// contents (index ranges, order, padding). They allocate nothing: a decoded payload is a view
// into the caller's buffer. Every rejection is kInvalidArgument with what was expected and
// what was found.
enum class PayloadKind : uint8_t {
  kCounts = 1,        // per-peer counts: count x u64
  kCooIndices = 2,    // count x i64 global row indices | count rows
  kCooPositions = 3,  // count x u32 local positions | pad | count rows
  kBitmap = 4,      // u64 bits | ceil(bits / 8) bitmap bytes | pad | count rows (count = popcount)
  kDenseRange = 5,  // u64 begin | count rows: rows [begin, begin + count)
  kBlocks = 6,      // count x u32 block ids, ascending | pad | count blocks of rowSize elements
  kCallInfo = 7,    // the dispatcher's per-call summary | count bytes of error message
  kEliasFano = 8,   // u64 universe | low bits | pad | bitvector | pad | count rows (ascending
                    // positions, core/elias_fano.h)
};
const char* payloadKindName(PayloadKind kind);

inline constexpr size_t kWireHeaderBytes = 16;
inline constexpr size_t kWireAlignment = 8;
inline constexpr uint8_t kWireMagic = 'Z';
inline constexpr uint8_t kWireVersion = 1;
// The header's rowSize field is 32 bits.
inline constexpr int64_t kMaxWireRowSize = int64_t{1} << 31;
// A call summary's error message is cut to this many bytes.
inline constexpr size_t kMaxCallMessageBytes = 2048;

// What the rows of a payload look like; both sides must agree.
struct RowFormat {
  DataType dtype = DataType::kFloat32;
  int64_t rowSize = 1;  // elements per row (kBlocks: per block)
  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
};

// The kind of a payload, after checking that a whole header with the right magic and
// version is there.
Result<PayloadKind> peekPayloadKind(const uint8_t* data, size_t size);

// --- per-peer counts -------------------------------------------------------------------------
void encodeCounts(const uint64_t* counts, size_t n, ByteVector* out);
// Exactly n counts, each at most maxCount.
Status decodeCounts(
    const uint8_t* data, size_t size, size_t n, uint64_t maxCount, std::vector<uint64_t>* out);

// --- COO with global int64 indices (agsparse) ------------------------------------------------
struct CooIndicesView {
  int64_t count = 0;
  const int64_t* indices = nullptr;
  const std::byte* values = nullptr;  // count rows
};
size_t cooIndicesBytes(int64_t count, size_t rowBytes);
// Sizes `out`, writes the header and returns where the caller writes indices and rows.
struct CooIndicesSlots {
  int64_t* indices;
  std::byte* values;
};
CooIndicesSlots startCooIndices(const RowFormat& format,
                                int64_t count,
                                ByteVector* out,
                                size_t at = 0);
void encodeCooIndices(const RowFormat& format,
                      const int64_t* indices,
                      const void* values,
                      int64_t count,
                      ByteVector* out,
                      size_t at = 0);
// Indices in [0, numRows), count <= maxCount; repeats allowed (uncoalesced input).
Result<CooIndicesView> decodeCooIndices(
    const uint8_t* data, size_t size, const RowFormat& format, int64_t numRows, int64_t maxCount);

// --- COO with 4-byte local positions (zen Push, sparse zen Pull parts) -----------------------
struct CooPositionsView {
  int64_t count = 0;
  const uint32_t* positions = nullptr;
  const std::byte* values = nullptr;
};
size_t cooPositionsBytes(int64_t count, size_t rowBytes);
struct CooPositionsSlots {
  uint32_t* positions;
  std::byte* values;
};
CooPositionsSlots startCooPositions(const RowFormat& format,
                                    int64_t count,
                                    ByteVector* out,
                                    size_t at = 0);
void encodeCooPositions(const RowFormat& format,
                        const uint32_t* positions,
                        const void* values,
                        int64_t count,
                        ByteVector* out,
                        size_t at = 0);
// Positions < bound, count <= maxCount; with strictlyAscending, no repeats and in order.
Result<CooPositionsView> decodeCooPositions(const uint8_t* data,
                                            size_t size,
                                            const RowFormat& format,
                                            uint64_t bound,
                                            int64_t maxCount,
                                            bool strictlyAscending);

// --- hash-bitmap part (zen Pull, Algorithm 2) ------------------------------------------------
struct BitmapPartView {
  uint64_t bits = 0;  // |I_j|
  const uint8_t* bitmap = nullptr;
  size_t bitmapBytes = 0;  // ceil(bits / 8)
  int64_t count = 0;       // set bits = rows
  const std::byte* values = nullptr;
};
size_t bitmapPartBytes(uint64_t bits, int64_t count, size_t rowBytes);
struct BitmapPartSlots {
  uint8_t* bitmap;  // ceil(bits / 8) bytes, LSB first; padding bits must stay zero
  std::byte* values;
};
BitmapPartSlots startBitmapPart(const RowFormat& format,
                                uint64_t bits,
                                int64_t count,
                                ByteVector* out);
void encodeBitmapPart(const RowFormat& format,
                      const uint8_t* bitmap,
                      uint64_t bits,
                      const void* values,
                      int64_t count,
                      ByteVector* out);
// bits must equal expectedBits; padding bits past it zero; count = popcount.
Result<BitmapPartView> decodeBitmapPart(const uint8_t* data,
                                        size_t size,
                                        const RowFormat& format,
                                        uint64_t expectedBits);

// --- Elias-Fano part (zen Pull: a sparse part's ascending positions, core/elias_fano.h) -------
struct EliasFanoPartView {
  uint64_t universe = 0;  // |I_j|
  EliasFanoShape shape;
  const uint8_t* low = nullptr;
  const uint8_t* high = nullptr;
  int64_t count = 0;
  const uint32_t* positions = nullptr;  // decoded into the caller's vector
  const std::byte* values = nullptr;
};
size_t eliasFanoPartBytes(uint64_t universe, int64_t count, size_t rowBytes);
struct EliasFanoPartSlots {
  EliasFanoWriter positions;  // push the count positions, ascending, then finish()
  std::byte* values;
};
// universe <= 2^32 (positions are 32-bit), count <= universe.
EliasFanoPartSlots startEliasFanoPart(const RowFormat& format,
                                      uint64_t universe,
                                      int64_t count,
                                      ByteVector* out);
// universe must equal expectedUniverse; the code checked whole and decoded in one pass
// (decodeEliasFano) into *positions (resized to count, which the exact size bounds): count
// positions, strictly ascending, below it.
Result<EliasFanoPartView> decodeEliasFanoPart(const uint8_t* data,
                                              size_t size,
                                              const RowFormat& format,
                                              uint64_t expectedUniverse,
                                              std::vector<uint32_t>* positions);

// --- dense range of rows ---------------------------------------------------------------------
struct DenseRangeView {
  uint64_t begin = 0;
  int64_t count = 0;
  const std::byte* values = nullptr;
};
size_t denseRangeBytes(int64_t count, size_t rowBytes);
std::byte* startDenseRange(const RowFormat& format, uint64_t begin, int64_t count, ByteVector* out);
void encodeDenseRange(
    const RowFormat& format, uint64_t begin, const void* values, int64_t count, ByteVector* out);
// begin + count <= limit.
Result<DenseRangeView> decodeDenseRange(const uint8_t* data,
                                        size_t size,
                                        const RowFormat& format,
                                        uint64_t limit);

// --- OmniReduce-style blocks: ids of the non-zero blocks of a flat tensor + their elements ---
// format.rowSize is the block length (256 by default). Every block travels whole; the last
// block of a tensor whose length is not a multiple carries padding the receiver ignores.
inline constexpr int64_t kDefaultBlockElements = 256;
struct BlocksView {
  int64_t count = 0;
  const uint32_t* ids = nullptr;  // strictly ascending, < numBlocks
  const std::byte* values = nullptr;
};
size_t blocksBytes(int64_t count, size_t blockBytes);
struct BlocksSlots {
  uint32_t* ids;
  std::byte* values;
};
BlocksSlots startBlocks(const RowFormat& format, int64_t count, ByteVector* out);
void encodeBlocks(const RowFormat& format,
                  const uint32_t* ids,
                  const void* values,
                  int64_t count,
                  ByteVector* out);
// numBlocks = ceil(elements / block length) <= 2^32.
Result<BlocksView> decodeBlocks(const uint8_t* data,
                                size_t size,
                                const RowFormat& format,
                                uint64_t numBlocks);

// --- the dispatcher's call summary: what every rank passed, and its local error ---------------
struct CallInfo {
  int32_t rank = 0;
  ReduceOp op = ReduceOp::kSum;
  Scheme scheme = Scheme::kAuto;  // as requested
  bool failed = false;
  bool denseOutput = false;
  DataType dtype = DataType::kFloat32;
  int64_t rowSize = 1;
  int64_t numRows = 0;
  int64_t nnz = 0;
  uint64_t seed = 0;
  std::string message;  // why it failed (cut to kMaxCallMessageBytes)
};
void encodeCallInfo(const CallInfo& info, ByteVector* out);
// expectedRank: the rank the payload came from.
Result<CallInfo> decodeCallInfo(const uint8_t* data, size_t size, int expectedRank);

// --- a call summary leading a message (the schemes' first exchange, ops/call_summary.h) -----
// One message = the call-info payload above | zero padding to a multiple of 8 | the scheme's
// payload, if any, which thus starts 8-byte aligned. Writes the summary and its padding into
// *out (sized to exactly that) and returns their size: the `at` for the payload's encoder.
size_t startSummarized(const CallInfo& info, ByteVector* out);
struct SummarizedView {
  CallInfo info;
  const uint8_t* payload = nullptr;  // the bytes after the summary's padding, not looked at
  size_t payloadBytes = 0;
};
// The summary is decoded and checked (as decodeCallInfo) and its padding checked zero before
// the payload is located.
Result<SummarizedView> decodeSummarized(const uint8_t* data, size_t size, int expectedRank);

}  // namespace zen::ops
