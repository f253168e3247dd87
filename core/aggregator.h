#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/index_map.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace zen {

// Server j's side of Balanced Parallelism (ALGORITHMS.md §5 step 3): a dense array of
// |I_j| = map.partSize(j) rows of accumulators (AccumulatorT: fp32 for 16-bit floats, fp64
// for fp64, int64 for integers) that every rank's Push list for j is scatter-added into, and
// an occupancy bitmap. A bit is set iff some rank pushed that position, even when the rows
// cancel to zero: the result is the union of the pushed index sets, like a sparse sum.
// The occupancy bitmap is Algorithm 2's bitmap, and its compaction the values (hash_bitmap.h).
class PartitionAggregator {
 public:
  // With a pool of more than one thread, large add() calls are split by position range.
  explicit PartitionAggregator(ThreadPool* pool = nullptr) : pool_(pool) {}

  // Starts a new aggregation for part `part` of `map`: all slots zero, no bit set. Keeps the
  // memory of earlier steps and clears only the rows used last time (all of them after a
  // dense step), also when the part, row size or dtype changed.
  Status reset(const IndexMap& map, uint32_t part, DataType dtype, int64_t rowSize);

  // Zeroes the rows in use and the bitmap now, for a caller that has read them (encode) and
  // still has them in cache; the next reset() then finds nothing to clear.
  void clear();

  // Scatter-adds `count` rows (rowSize elements of the dtype each, contiguous) at the given
  // local positions. A position >= size() means a corrupt push payload: kInvalidArgument,
  // and nothing is written.
  Status add(const uint32_t* positions, const void* values, int64_t count);

  uint32_t part() const { return part_; }
  uint64_t size() const { return size_; }  // |I_j|
  DataType dtype() const { return dtype_; }
  int64_t rowSize() const { return rowSize_; }
  int64_t entriesAdded() const { return entriesAdded_; }

  // Bit p of word p / 64 (LSB first) is position p; words past size() are zero.
  const std::vector<uint64_t>& occupancy() const { return bits_; }
  size_t occupancyWords() const { return static_cast<size_t>((size_ + 63) / 64); }
  // Number of occupied positions (the bitmap's popcount, counted as bits are set).
  int64_t occupied() const { return occupied_; }

  // Calls visit(pos) for every occupied position in ascending order, and prefetch(pos) a few
  // positions earlier: the rows of a sparse part are scattered, each a likely cache and TLB
  // miss, and a walk that fetches ahead overlaps them.
  template <typename Prefetch, typename Visit>
  void forEachOccupied(Prefetch&& prefetch, Visit&& visit) const {
    constexpr int64_t kAhead = 8;
    uint64_t ring[kAhead];
    int64_t seen = 0;
    for (size_t w = 0; w < bits_.size(); ++w) {
      for (uint64_t m = bits_[w]; m != 0; m &= m - 1) {
        const uint64_t pos = w * 64 + static_cast<uint64_t>(__builtin_ctzll(m));
        prefetch(pos);
        if (seen >= kAhead) visit(ring[seen % kAhead]);
        ring[seen % kAhead] = pos;
        ++seen;
      }
    }
    for (int64_t k = std::max<int64_t>(0, seen - kAhead); k < seen; ++k) visit(ring[k % kAhead]);
  }

  // size() x rowSize accumulators of AccumulatorT<the dtype's C++ type>.
  template <typename Acc>
  const Acc* accumulators() const {
    return reinterpret_cast<const Acc*>(acc_.data());
  }

 private:
  // Zeroes the accumulator rows of the set bits (all of them after a dense step); keeps the bits.
  void clearRows();

  ThreadPool* pool_;
  uint32_t part_ = 0;
  uint64_t size_ = 0;
  DataType dtype_ = DataType::kFloat32;
  int64_t rowSize_ = 1;
  size_t accBytes_ = 0;  // bytes per accumulator element
  int64_t entriesAdded_ = 0;
  int64_t occupied_ = 0;
  std::vector<std::byte> acc_;  // size_ * rowSize_ * accBytes_
  std::vector<uint64_t> bits_;
};

}  // namespace zen
