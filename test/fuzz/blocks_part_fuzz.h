#pragma once

// Shared by the fuzzers of the blocks scheme's decoders (blocks_push_fuzz.cc,
// blocks_pull_fuzz.cc; see fuzz_payload.h for the input layout). Byte 0 bits 1-2 pick a
// geometry and an owner; the valid part edited is that owner's part of a few rows. What decodes
// must walk inside the buffer with the contract's ids and masks, and its rows must survive
// encode -> decode unchanged (the rows a mask leaves out are ignored, so bytes may differ).

#include <utility>
#include <vector>

#include "ops/blocks_wire.h"
#include "test/fuzz/fuzz_payload.h"

namespace zen::ops::fuzz {

struct BlocksCase {
  BlockGeometry geometry;
  int owner;
};

inline BlocksCase blocksCase(uint8_t selector) {
  switch ((selector >> 1) & 3) {
    case 0:  // 9-row blocks with 2 mask bytes (7 padding bits), last block 1 row; 2 owners
      return {BlockGeometry(10, 30, 2, 1), 0};
    case 1:
      return {BlockGeometry(10, 30, 2, 1), 1};
    case 2:  // 3-row blocks, 7 of them, 3 per owner: owner 2 holds block 6 (2 rows)
      return {BlockGeometry(20, 100, 3, 1), 2};
    default:  // one row a block, 5 blocks of 4 owners; the scheme's 256-row case is in the tests
      return {BlockGeometry(5, 300, 4, 1), 2};
  }
}

// Most rows (not those with r % 4 == 2), so masks are partly set, with distinct values.
inline std::vector<ByteVector> validParts(const BlockGeometry& g) {
  std::vector<int64_t> indices;
  for (int64_t r = 0; r < g.numRows; ++r) {
    if (r % 4 != 2) indices.push_back(r);
  }
  std::vector<uint8_t> values(indices.size() * g.rowBytes());
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 7 + 1);
  return encodeBlocksPush(g, indices.data(), values.data(), indices.size());
}

// The rows a decoded part carries; checks ids, masks and bounds on the way.
struct PartRows {
  std::vector<int64_t> indices;
  std::vector<uint8_t> values;
};
inline PartRows rowsOf(const BlockGeometry& g,
                       int owner,
                       const BlocksPartView& v,
                       const uint8_t* end) {
  PartRows rows;
  int64_t previous = -1;
  forEachBlock(g, v, [&](int64_t block, const uint8_t* mask, const uint8_t* data) {
    const size_t bytes = static_cast<size_t>(g.rowsIn(block)) * g.rowBytes();
    require(block > previous && block < g.numBlocks && g.owner(block) == owner);
    require(data + bytes <= end);
    touch(mask, g.maskBytes);
    touch(data, bytes);
    previous = block;
    for (int64_t r = 0; r < static_cast<int64_t>(g.maskBytes) * 8; ++r) {
      if (!maskBit(mask, r)) continue;
      require(r < g.rowsIn(block));
      rows.indices.push_back(block * g.rowsPerBlock + r);
      const uint8_t* row = data + static_cast<size_t>(r) * g.rowBytes();
      rows.values.insert(rows.values.end(), row, row + g.rowBytes());
    }
  });
  return rows;
}

inline int fuzzBlocksPart(const uint8_t* data, size_t size, bool pull) {
  if (size == 0) return 0;
  const BlocksCase c = blocksCase(data[0]);
  const BlockGeometry& g = c.geometry;
  ByteVector valid = validParts(g)[static_cast<size_t>(c.owner)];
  if (pull) {
    ByteVector part;
    startBlocksPull(static_cast<uint64_t>(g.ranks), &part);
    part.insert(part.end(), valid.begin(), valid.end());
    valid = std::move(part);
  }
  const ByteVector p = makePayload(data, size, valid);
  const Result<BlocksPartView> v = pull ? decodeBlocksPull(p.data(), p.size(), g, c.owner)
                                        : decodeBlocksPush(p.data(), p.size(), g, c.owner);
  requireCleanError(v.status());
  if (!v.isOk()) return 0;
  const BlocksPartView& view = v.value();
  require(view.bytes + (pull ? 8 : 0) == p.size());
  const auto range = static_cast<uint64_t>(g.firstBlock(c.owner + 1) - g.firstBlock(c.owner));
  const auto count = static_cast<uint64_t>(view.count);
  require(count <= range);
  require(!pull || (view.load >= count && view.load <= static_cast<uint64_t>(g.ranks) * range));
  const PartRows rows = rowsOf(g, c.owner, view, p.data() + p.size());
  require(rows.indices.size() >= count);  // no block without a row

  // Round trip: the rows re-encoded land in this owner's part only and decode the same.
  const std::vector<ByteVector> again =
      encodeBlocksPush(g, rows.indices.data(), rows.values.data(), rows.indices.size());
  for (int o = 0; o < g.ranks; ++o) require(o == c.owner || again[static_cast<size_t>(o)].empty());
  const ByteVector& mine = again[static_cast<size_t>(c.owner)];
  const Result<BlocksPartView> w = decodeBlocksPush(mine.data(), mine.size(), g, c.owner);
  require(w.isOk() && w.value().count == view.count);
  const PartRows back = rowsOf(g, c.owner, w.value(), mine.data() + mine.size());
  require(back.indices == rows.indices && back.values == rows.values);
  return 0;
}

}  // namespace zen::ops::fuzz
