#pragma once

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
  // memory of earlier steps; with an unchanged layout it clears only the rows used last time.
  Status reset(const IndexMap& map, uint32_t part, DataType dtype, int64_t rowSize);

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
  // Number of occupied positions (popcount of the bitmap).
  int64_t occupied() const;

  // size() x rowSize accumulators of AccumulatorT<the dtype's C++ type>.
  template <typename Acc>
  const Acc* accumulators() const {
    return reinterpret_cast<const Acc*>(acc_.data());
  }

 private:
  ThreadPool* pool_;
  uint32_t part_ = 0;
  uint64_t size_ = 0;
  DataType dtype_ = DataType::kFloat32;
  int64_t rowSize_ = 1;
  size_t accBytes_ = 0;  // bytes per accumulator element
  int64_t entriesAdded_ = 0;
  std::vector<std::byte> acc_;  // size_ * rowSize_ * accBytes_
  std::vector<uint64_t> bits_;
};

}  // namespace zen
