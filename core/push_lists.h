#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace zen {

// Push-side output of a partitioner, laid out for an all-to-all-v: destination p's entries
// are [offsets[p], offsets[p + 1]). Each entry is the index's local position inside p's index
// set (IndexMap::place), so an index costs 4 bytes on the wire, plus its value row in the
// input dtype with this rank's duplicates already summed.
struct PushLists {
  std::vector<int64_t> offsets;     // numParts + 1
  std::vector<uint32_t> positions;  // local positions, grouped by destination
  std::vector<std::byte> values;    // one row per position, same order
  DataType dtype = DataType::kFloat32;
  int64_t rowSize = 1;

  int numParts() const { return offsets.empty() ? 0 : static_cast<int>(offsets.size()) - 1; }
  int64_t count(int part) const { return offsets[part + 1] - offsets[part]; }
  int64_t total() const { return offsets.empty() ? 0 : offsets.back(); }
  size_t rowBytes() const { return static_cast<size_t>(rowSize) * dataTypeSize(dtype); }
  const std::byte* row(int64_t i) const {
    return values.data() + static_cast<size_t>(i) * rowBytes();
  }
  // Bytes this rank puts on the wire for destination `part` (positions + values).
  size_t wireBytes(int part) const {
    return static_cast<size_t>(count(part)) * (sizeof(uint32_t) + rowBytes());
  }
};

// What a partitioner did, for tests, benchmarks and the timeline.
struct PartitionStats {
  int64_t input = 0;        // entries in
  int64_t unique = 0;       // distinct indices out
  int64_t duplicates = 0;   // entries summed into an earlier one of the same index
  int64_t spilled = 0;      // distinct indices that went to serial memory after k probes
  int64_t overflowed = 0;   // entries past the bounded serial memory, handled by the fallback
  int64_t lost = 0;         // entries dropped: always 0 except for the straw-man
  size_t scratchBytes = 0;  // working memory held by the partitioner
};

}  // namespace zen
