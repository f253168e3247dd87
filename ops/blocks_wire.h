#pragma once

// The messages of the blocks scheme (ops/sparse_allreduce_blocks.cc) and the geometry both
// sides derive them from.
//
// Rows are grouped into blocks of R = max(1, ceil(256 / rowSize)) rows (the last block may be
// shorter); rank j owns the contiguous range of ceil(B / n) blocks starting at j * ceil(B / n).
// A part is a sequence of blocks of one owner's range, ids strictly ascending, each
//   u32 block id | ceil(R / 8)-byte row mask | rowsIn(block) rows of rowSize elements
// where mask bit r (LSB first) says row r of the block is present; at least one bit is set and
// the bits past rowsIn(block) are zero. Rows whose bit is clear travel as zero and are ignored.
// A push part (rank -> owner) is just the blocks; a pull part (owner -> every rank) is a u64
// load (blocks the owner received in the push, its own included) followed by the blocks.
// Nothing is aligned; fields are little-endian (host order, little-endian hosts only).
//
// The decoders never trust a part: they walk it once checking every id (range, order), every
// block's length and mask, and the load, before the caller reads anything; they allocate
// nothing and return a view. Every rejection is kInvalidArgument saying what was expected.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "ops/byte_io.h"
#include "ops/transport.h"

namespace zen::ops {

inline constexpr int64_t kBlockElements = 256;

struct BlockGeometry {
  // elementBytes: the size of one element as the rows travel (the dtype's).
  BlockGeometry(int64_t numRowsIn, int64_t rowSizeIn, int ranksIn, size_t elementBytesIn)
      : numRows(numRowsIn),
        rowSize(rowSizeIn),
        ranks(ranksIn),
        elementBytes(elementBytesIn),
        rowsPerBlock(std::max<int64_t>(1, (kBlockElements + rowSizeIn - 1) / rowSizeIn)),
        numBlocks((numRowsIn + rowsPerBlock - 1) / rowsPerBlock),
        blocksPerOwner(std::max<int64_t>(1, (numBlocks + ranksIn - 1) / ranksIn)),
        maskBytes(static_cast<size_t>((rowsPerBlock + 7) / 8)) {}

  int owner(int64_t block) const { return static_cast<int>(block / blocksPerOwner); }
  int64_t firstBlock(int owner) const { return std::min(owner * blocksPerOwner, numBlocks); }
  int64_t rowsIn(int64_t block) const {
    return std::min(rowsPerBlock, numRows - block * rowsPerBlock);
  }
  size_t rowBytes() const { return static_cast<size_t>(rowSize) * elementBytes; }
  size_t blockBytes(int64_t block) const {
    return 4 + maskBytes + static_cast<size_t>(rowsIn(block)) * rowBytes();
  }

  int64_t numRows;
  int64_t rowSize;
  int ranks;
  size_t elementBytes;
  int64_t rowsPerBlock;
  int64_t numBlocks;
  int64_t blocksPerOwner;
  size_t maskBytes;
};

inline bool maskBit(const uint8_t* mask, int64_t row) {
  return (mask[row / 8] >> (row % 8)) & 1;
}

// Where a block appended by appendBlock lies in its part (offsets: the part may grow).
struct BlockSlots {
  size_t mask;
  size_t rows;
};
// Appends block `block` with a zero mask and zero rows.
BlockSlots appendBlock(const BlockGeometry& g, int64_t block, ByteVector* out);

// The push parts, one per owner, of `count` rows with ascending unique indices in
// [0, numRows) and count x rowBytes() of values; each message starts with `lead` (the call
// summary, ops/call_summary.h), the part behind it.
std::vector<ByteVector> encodeBlocksPush(const BlockGeometry& g,
                                         const int64_t* indices,
                                         const void* values,
                                         size_t count,
                                         const ByteVector& lead = {});
// A pull part's load; the owner's blocks follow, appended with appendBlock.
void startBlocksPull(uint64_t load, ByteVector* out);

struct BlocksPartView {
  const uint8_t* blocks = nullptr;  // the encoded blocks
  size_t bytes = 0;
  int64_t count = 0;  // blocks in the part
  uint64_t load = 0;  // pull parts: in [count, ranks x blocks in the owner's range]
};
// A part sent to (push) or by (pull) rank `owner`.
Result<BlocksPartView> decodeBlocksPush(const uint8_t* data,
                                        size_t size,
                                        const BlockGeometry& g,
                                        int owner);
Result<BlocksPartView> decodeBlocksPull(const uint8_t* data,
                                        size_t size,
                                        const BlockGeometry& g,
                                        int owner);

// Calls fn(block, mask, rows) for each block of a decoded part.
template <typename Fn>
void forEachBlock(const BlockGeometry& g, const BlocksPartView& part, Fn&& fn) {
  size_t at = 0;
  for (int64_t k = 0; k < part.count; ++k) {
    const auto block = static_cast<int64_t>(loadAt<uint32_t>(part.blocks + at, 0));
    fn(block, part.blocks + at + 4, part.blocks + at + 4 + g.maskBytes);
    at += g.blockBytes(block);
  }
}

}  // namespace zen::ops
