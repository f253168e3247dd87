#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zen {

// A map from a part's local positions (32 bits) to row numbers 0, 1, 2, ... in the order the
// positions were first inserted: the sparse aggregation's index into its compact rows
// (PartitionAggregator). Open addressing with linear probing, at most half full; clear()
// costs the entries in use, not the capacity, so a table that grew once stays cheap.
class PositionTable {
 public:
  // The row of `pos`; a position not yet in the table gets row size() and *inserted = true.
  uint32_t findOrInsert(uint32_t pos, bool* inserted) {
    if ((used_.size() + 1) * 2 > slots_.size()) grow();
    const uint64_t key = uint64_t{pos} + 1;
    for (size_t s = slotOf(pos);; s = (s + 1) & mask_) {
      const uint64_t slot = slots_[s];
      if (slot == 0) {
        const auto row = static_cast<uint32_t>(used_.size());
        slots_[s] = key << 32 | row;
        used_.push_back(static_cast<uint32_t>(s));
        *inserted = true;
        return row;
      }
      if (slot >> 32 == key) {
        *inserted = false;
        return static_cast<uint32_t>(slot);
      }
    }
  }

  // The row of a position that is in the table.
  uint32_t find(uint32_t pos) const {
    const uint64_t key = uint64_t{pos} + 1;
    size_t s = slotOf(pos);
    while (slots_[s] >> 32 != key) s = (s + 1) & mask_;
    return static_cast<uint32_t>(slots_[s]);
  }

  int64_t size() const { return static_cast<int64_t>(used_.size()); }

  // Empties the table and keeps its memory.
  void clear();

 private:
  size_t slotOf(uint32_t pos) const {
    // Fibonacci hashing: the top bits of the product, spread whatever the positions' pattern.
    return static_cast<size_t>((uint64_t{pos} * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  // Doubles the slots (from kMinSlots) and re-inserts the entries, keeping their rows.
  void grow();

  std::vector<uint64_t> slots_;  // 0: empty; else (pos + 1) << 32 | row
  std::vector<uint32_t> used_;   // slot of row k, for clear() and grow()
  size_t mask_ = 0;
  int shift_ = 64;
};

}  // namespace zen
