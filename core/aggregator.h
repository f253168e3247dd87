#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/index_map.h"
#include "core/position_table.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "core/zeroed_pages.h"

namespace zen {

// Where PartitionAggregator sums a step (see its comment).
enum class AggregationPath : uint8_t {
  kAuto,     // compact while few entries were pushed, then dense (PartitionAggregator)
  kDense,    // always the |I_j|-row array (tests, and measuring the rule)
  kCompact,  // always compact rows, however many (tests, and measuring the rule)
};

// Server j's side of Balanced Parallelism (ALGORITHMS.md §5 step 3): a dense array of
// |I_j| = map.partSize(j) rows of accumulators (AccumulatorT: fp32 for 16-bit floats, fp64
// for fp64, int64 for integers) that every rank's Push list for j is scatter-added into, and
// an occupancy bitmap. A bit is set iff some rank pushed that position, even when the rows
// cancel to zero: the result is the union of the pushed index sets, like a sparse sum.
// The occupancy bitmap is Algorithm 2's bitmap, and its compaction the values (hash_bitmap.h).
//
// A step whose pushed entries are few against |I_j| is summed in compact rows instead: a
// PositionTable gives each distinct position a row in first-seen order, so the adds touch
// O(entries) contiguous memory instead of one scattered (cache- and TLB-missing) row of the
// large array each. The sums are the same bit for bit: each position starts from zero and
// adds its rows in the same order (rank order, then list order) in the same accumulator type.
// A step starts compact and moves to the dense array for good, rows copied as they are, as
// soon as an add() could take it past |I_j| / kCompactFactor distinct positions; a step whose
// entries reset() is told (zen knows them after the Push) picks its path once, at the start.
class PartitionAggregator {
 public:
  // A step stays compact while (distinct positions so far + the entries of an add) x
  // kCompactFactor <= |I_j|. Measured in docs/BENCHMARKS.md ("zen's CPU cost", 2026-12-02).
  static constexpr int64_t kCompactFactor = 16;

  // With a pool of more than one thread, large add() calls are split by position range
  // (dense steps only: compact steps are small by definition).
  explicit PartitionAggregator(ThreadPool* pool = nullptr,
                               AggregationPath path = AggregationPath::kAuto)
      : pool_(pool), path_(path) {}

  // Starts a new aggregation for part `part` of `map`: all slots zero, no bit set. Keeps the
  // memory of earlier steps and clears only the rows used last time (all of them after a
  // dense step), also when the part, row size or dtype changed. expectedEntries, when the
  // caller knows the step's entries (>= 0): a step that would outgrow the compact rows starts
  // dense, instead of moving its rows there part way.
  Status reset(const IndexMap& map,
               uint32_t part,
               DataType dtype,
               int64_t rowSize,
               int64_t expectedEntries = -1);

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
  // Whether this step's rows are compact (see the class comment) rather than in accumulators().
  bool compact() const { return compact_; }

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

  // Calls visit(row) with the accumulated row (rowSize Acc = AccumulatorT<the dtype's C++
  // type>) of every occupied position in ascending order, whichever path the step took.
  template <typename Acc, typename Visit>
  void forEachOccupiedRow(Visit&& visit) const {
    const auto stride = static_cast<uint64_t>(rowSize_);
    if (compact_) {
      const auto* rows = reinterpret_cast<const Acc*>(compactAcc_.data());
      forEachOccupied(
          [](uint64_t) {},
          [&](uint64_t pos) { visit(rows + table_.find(static_cast<uint32_t>(pos)) * stride); });
      return;
    }
    const Acc* acc = accumulators<Acc>();
    forEachOccupied([&](uint64_t pos) { __builtin_prefetch(acc + pos * stride); },
                    [&](uint64_t pos) { visit(acc + pos * stride); });
  }

  // size() x rowSize accumulators of AccumulatorT<the dtype's C++ type>: the rows of a dense
  // step (all zero during a compact one).
  template <typename Acc>
  const Acc* accumulators() const {
    return reinterpret_cast<const Acc*>(acc_.data());
  }

 private:
  // Zeroes the accumulator rows of the set bits (all of them after a dense step), or the
  // compact rows and their table; keeps the bits.
  void clearRows();
  // Whether `count` more entries keep this step compact.
  bool staysCompact(int64_t count) const;
  // Leaves the compact path for this step: copies each compact row to its position's row of
  // acc_ (the running sums, unchanged) and empties the compact rows.
  void toDense();

  ThreadPool* pool_;
  uint32_t part_ = 0;
  uint64_t size_ = 0;
  DataType dtype_ = DataType::kFloat32;
  int64_t rowSize_ = 1;
  size_t accBytes_ = 0;  // bytes per accumulator element
  int64_t entriesAdded_ = 0;
  int64_t occupied_ = 0;
  // size_ * rowSize_ * accBytes_ (or more), zero but for this step's rows of a dense step;
  // pages the kernel zeroes on first touch, so compact steps neither fill nor keep them.
  ZeroedPages acc_;
  std::vector<uint64_t> bits_;
  AggregationPath path_;
  bool compact_ = false;  // this step's rows are in compactAcc_, not acc_
  PositionTable table_;   // occupied position -> its row of compactAcc_
  // occupied_ rows in first-seen order, zero past them (grows, never shrinks).
  std::vector<std::byte> compactAcc_;
};

}  // namespace zen
