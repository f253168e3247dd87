// Encoders and validating decoders of the blocks scheme's parts (layout in the header).
//
// Decoding order: geometry and owner sane -> (pull) the load field present -> per block, before
// anything of it is read: an id fits, the id is in the owner's range and above the previous,
// the whole block fits -> its mask has a row and zero padding -> (pull) the load against the
// blocks found. The caller reads rows only after the whole part passed.
#include "ops/blocks_wire.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace zen::ops {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the blocks parts are little-endian");

Status checkGeometry(const BlockGeometry& g, int owner) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  ZEN_CHECK_ARG(g.ranks >= 1 && g.numRows >= 0 && g.rowSize >= 1 && g.elementBytes >= 1,
                "blocks geometry: {} ranks, {} rows of {} elements of {} bytes", g.ranks, g.numRows,
                g.rowSize, g.elementBytes);
  ZEN_CHECK_ARG(g.numBlocks <= int64_t{std::numeric_limits<uint32_t>::max()} + 1,
                "blocks geometry: {} blocks do not fit 32-bit block ids", g.numBlocks);
  ZEN_CHECK_ARG(static_cast<size_t>(g.rowSize) <= kMax / g.elementBytes &&
                    g.rowBytes() <= kMax / 2 / static_cast<size_t>(g.rowsPerBlock),
                "blocks geometry: a block of {} rows of {} x {} bytes overflows size_t",
                g.rowsPerBlock, g.rowSize, g.elementBytes);
  ZEN_CHECK_ARG(owner >= 0 && owner < g.ranks, "blocks part: owner {} is not a rank of {}", owner,
                g.ranks);
  return Status::ok();
}

bool allZero(const uint8_t* begin, size_t bytes) {
  return std::all_of(begin, begin + bytes, [](uint8_t b) { return b == 0; });
}

// Walks the blocks of [data, data + size), checking each completely before the next.
Result<BlocksPartView> walkBlocks(
    const uint8_t* data, size_t size, const BlockGeometry& g, int owner, const char* what) {
  const int64_t first = g.firstBlock(owner);
  const int64_t end = g.firstBlock(owner + 1);
  BlocksPartView v;
  v.blocks = data;
  v.bytes = size;
  int64_t previous = first - 1;
  size_t at = 0;
  while (at < size) {
    ZEN_CHECK_ARG(size - at >= 4,
                  "blocks {} part of owner {}: {} bytes left at byte {} of {}, less than a "
                  "block id",
                  what, owner, size - at, at, size);
    const auto block = static_cast<int64_t>(loadAt<uint32_t>(data + at, 0));
    ZEN_CHECK_ARG(block > previous && block < end,
                  "blocks {} part of owner {}: block {} at byte {} of {} (expected ascending "
                  "blocks in [{}, {}) after {})",
                  what, owner, block, at, size, first, end, previous);
    const size_t bytes = g.blockBytes(block);
    ZEN_CHECK_ARG(size - at >= bytes,
                  "blocks {} part of owner {}: block {} at byte {} of {} is truncated ({} bytes, "
                  "expected {})",
                  what, owner, block, at, size, size - at, bytes);
    const uint8_t* mask = data + at + 4;
    const int64_t rows = g.rowsIn(block);
    const auto used = static_cast<size_t>((rows + 7) / 8);  // mask bytes that hold rows
    const uint8_t tail = rows % 8 == 0 ? 0 : mask[used - 1] >> (rows % 8);
    ZEN_CHECK_ARG(tail == 0 && allZero(mask + used, g.maskBytes - used),
                  "blocks {} part of owner {}: block {} of {} rows has mask bits past its rows "
                  "set",
                  what, owner, block, rows);
    ZEN_CHECK_ARG(!allZero(mask, used),
                  "blocks {} part of owner {}: block {} has an empty row mask", what, owner, block);
    at += bytes;
    previous = block;
    ++v.count;
  }
  return v;
}

}  // namespace

BlockSlots appendBlock(const BlockGeometry& g, int64_t block, ByteVector* out) {
  const size_t at = out->size();
  const auto id = static_cast<uint32_t>(block);
  appendBytes(out, &id, 1);
  out->resize(at + g.blockBytes(block), 0);
  return {at + 4, at + 4 + g.maskBytes};
}

std::vector<ByteVector> encodeBlocksPush(const BlockGeometry& g,
                                         const int64_t* indices,
                                         const void* values,
                                         size_t count,
                                         const ByteVector& lead) {
  std::vector<ByteVector> parts(static_cast<size_t>(g.ranks), lead);
  const size_t rowBytes = g.rowBytes();
  const auto* in = static_cast<const uint8_t*>(values);
  int64_t current = -1;
  BlockSlots slots{0, 0};  // of the current block, in its owner's part
  for (size_t k = 0; k < count; ++k) {
    const int64_t block = indices[k] / g.rowsPerBlock;
    ByteVector& part = parts[static_cast<size_t>(g.owner(block))];
    if (block != current) {
      current = block;
      slots = appendBlock(g, block, &part);
    }
    const int64_t row = indices[k] - block * g.rowsPerBlock;
    part[slots.mask + static_cast<size_t>(row / 8)] |= static_cast<uint8_t>(1u << (row % 8));
    std::memcpy(part.data() + slots.rows + static_cast<size_t>(row) * rowBytes, in + k * rowBytes,
                rowBytes);
  }
  return parts;
}

void startBlocksPull(uint64_t load, ByteVector* out) {
  out->clear();
  appendBytes(out, &load, 1);
}

Result<BlocksPartView> decodeBlocksPush(const uint8_t* data,
                                        size_t size,
                                        const BlockGeometry& g,
                                        int owner) {
  ZEN_CHECK_ARG(data != nullptr || size == 0, "blocks push part: null buffer of {} bytes", size);
  ZEN_RETURN_IF_ERROR(checkGeometry(g, owner));
  return walkBlocks(data, size, g, owner, "push");
}

Result<BlocksPartView> decodeBlocksPull(const uint8_t* data,
                                        size_t size,
                                        const BlockGeometry& g,
                                        int owner) {
  ZEN_CHECK_ARG(data != nullptr || size == 0, "blocks pull part: null buffer of {} bytes", size);
  ZEN_RETURN_IF_ERROR(checkGeometry(g, owner));
  ZEN_CHECK_ARG(size >= sizeof(uint64_t),
                "blocks pull part of owner {} has {} bytes, expected at least 8", owner, size);
  ZEN_ASSIGN_OR_RETURN(BlocksPartView v, walkBlocks(data + 8, size - 8, g, owner, "pull"));
  v.load = loadAt<uint64_t>(data, 0);
  const auto range = static_cast<uint64_t>(g.firstBlock(owner + 1) - g.firstBlock(owner));
  const uint64_t most = static_cast<uint64_t>(g.ranks) * range;
  ZEN_CHECK_ARG(v.load >= static_cast<uint64_t>(v.count) && v.load <= most,
                "blocks pull part of owner {}: load {} outside [{}, {}] ({} blocks sent, {} ranks "
                "x {} blocks in its range)",
                owner, v.load, v.count, most, v.count, g.ranks, range);
  return v;
}

}  // namespace zen::ops
