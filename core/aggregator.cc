// Server-side aggregation of Balanced Parallelism (ALGORITHMS.md §5 step 3).
//
// Steps for server j, per step:
//   1. reset: |I_j| x rowSize accumulators to zero (only last step's rows unless it was dense,
//      whatever the new layout), occupancy bitmap to zero.
//   2. add, once per sending rank: check every local position < |I_j| (a corrupt payload is
//      rejected before anything is written), then acc[pos] += row in the accumulator type
//      and set bit pos. With a pool, tasks own disjoint 64-aligned position ranges, so no
//      two threads touch the same accumulator or bitmap word. While the step's distinct
//      positions stay below |I_j| / kCompactFactor, acc[pos] is instead a compact row found
//      through a PositionTable (rows in first-seen order); past it, the compact rows move to
//      their positions in the dense array once and the step goes on there.
// Nothing goes on the wire here: the input is the (n - 1) received Push lists of
// count * (4 + rowBytes) bytes each, plus this rank's own list.
#include "core/aggregator.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/fixed_size.h"

namespace zen {
namespace {

// Below this many element updates a single thread is faster than waking the pool.
constexpr int64_t kParallelMinElements = 1 << 16;
// Rows fetched ahead of their use in the scattered adds.
constexpr int64_t kAhead = 8;

// fn(rowSize) with rowSize a std::integral_constant for 1, 2, 4 and 8 elements, else the
// int64_t itself: the adds below then run a fixed-length row loop, not a counted one, for the
// common rows (one element for a dense-gradient tensor, 8 for DeepFM's embeddings).
template <typename Fn>
void withRowSize(int64_t rowSize, Fn&& fn) {
  withFixedSize<int64_t, 1, 2, 4, 8>(rowSize, fn);
}

// dst[e] += src[e] for e < rowSize, in the accumulator type.
template <typename T, typename RowSize>
inline void addRow(AccumulatorT<T>* dst, const T* src, RowSize rowSize) {
  for (int64_t e = 0; e < static_cast<int64_t>(rowSize); ++e) {
    dst[e] += toAccumulator<AccumulatorT<T>>(src[e]);
  }
}

// Returns the number of bits it set that were clear.
template <typename T, typename RowSize>
int64_t scatterAdd(const uint32_t* positions,
                   const T* values,
                   int64_t count,
                   RowSize rowSize,
                   uint64_t lo,
                   uint64_t hi,
                   AccumulatorT<T>* acc,
                   uint64_t* bits) {
  const auto stride = static_cast<uint64_t>(rowSize);
  int64_t fresh = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (i + kAhead < count) __builtin_prefetch(acc + positions[i + kAhead] * stride, 1);
    const uint64_t pos = positions[i];
    if (pos < lo || pos >= hi) continue;
    const uint64_t bit = uint64_t{1} << (pos & 63);
    fresh += (bits[pos >> 6] & bit) == 0 ? 1 : 0;
    bits[pos >> 6] |= bit;
    addRow(acc + pos * stride, values + static_cast<uint64_t>(i) * stride, rowSize);
  }
  return fresh;
}

// scatterAdd's compact counterpart: the row of pos is table->findOrInsert(pos), rows zero
// until first added to. Returns the number of positions it inserted.
template <typename T, typename RowSize>
int64_t compactAdd(const uint32_t* positions,
                   const T* values,
                   int64_t count,
                   RowSize rowSize,
                   PositionTable* table,
                   AccumulatorT<T>* rows,
                   uint64_t* bits) {
  const auto stride = static_cast<uint64_t>(rowSize);
  int64_t fresh = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t pos = positions[i];
    bool inserted = false;
    const uint32_t row = table->findOrInsert(pos, &inserted);
    if (inserted) {
      bits[pos >> 6] |= uint64_t{1} << (pos & 63);
      ++fresh;
    }
    addRow(rows + row * stride, values + static_cast<uint64_t>(i) * stride, rowSize);
  }
  return fresh;
}

}  // namespace

Status PartitionAggregator::reset(
    const IndexMap& map, uint32_t part, DataType dtype, int64_t rowSize, int64_t expectedEntries) {
  ZEN_CHECK_ARG(static_cast<int64_t>(part) < map.numParts(),
                "part {} out of range: the index map has {} parts", part, map.numParts());
  ZEN_CHECK_ARG(rowSize >= 1, "row size must be at least 1, got {}", rowSize);
  const uint64_t size = map.partSize(static_cast<int>(part));
  // Push lists carry 32-bit local positions.
  ZEN_CHECK_ARG(size <= uint64_t{std::numeric_limits<uint32_t>::max()} + 1,
                "part {} owns {} rows, more than 32-bit local positions can address", part, size);
  const size_t accBytes =
      dispatchDataType(dtype, [](auto tag) { return sizeof(AccumulatorT<decltype(tag)>); });
  const size_t rowAccBytes = static_cast<size_t>(rowSize) * accBytes;
  const size_t words = static_cast<size_t>((size + 63) / 64);

  // acc_ is zero everywhere but the rows of the set bits (laid out with the last step's row
  // stride) and never shrinks, so a new layout (another part size, row size or dtype: a
  // training loop alternating between buckets) costs a clear of last step's rows, not a fill
  // of the whole part.
  clearRows();
  // All zero now; a larger array is fresh zero pages, touched only where rows land.
  acc_.growZeroed(size * rowAccBytes);
  bits_.assign(words, 0);
  part_ = part;
  size_ = size;
  dtype_ = dtype;
  rowSize_ = rowSize;
  accBytes_ = accBytes;
  entriesAdded_ = 0;
  occupied_ = 0;
  compact_ = path_ != AggregationPath::kDense;
  if (path_ == AggregationPath::kAuto && expectedEntries >= 0) {
    compact_ = staysCompact(expectedEntries);
  }
  return Status::ok();
}

void PartitionAggregator::clearRows() {
  const size_t rowAccBytes = static_cast<size_t>(rowSize_) * accBytes_;
  if (compact_) {
    if (occupied_ > 0) std::memset(compactAcc_.data(), 0, occupied_ * rowAccBytes);
    table_.clear();
    return;
  }
  if (occupied_ * 8 >= static_cast<int64_t>(size_)) {
    if (size_ > 0) std::memset(acc_.data(), 0, size_ * rowAccBytes);
    return;
  }
  std::byte* acc = acc_.data();
  forEachOccupied([&](uint64_t pos) { __builtin_prefetch(acc + pos * rowAccBytes, 1); },
                  [&](uint64_t pos) { std::memset(acc + pos * rowAccBytes, 0, rowAccBytes); });
}

void PartitionAggregator::clear() {
  clearRows();
  std::fill(bits_.begin(), bits_.end(), 0);
  occupied_ = 0;
}

bool PartitionAggregator::staysCompact(int64_t count) const {
  if (path_ != AggregationPath::kAuto) return path_ == AggregationPath::kCompact;
  return (occupied_ + count) * kCompactFactor <= static_cast<int64_t>(size_);
}

void PartitionAggregator::toDense() {
  const size_t rowAccBytes = static_cast<size_t>(rowSize_) * accBytes_;
  std::byte* acc = acc_.data();
  const std::byte* rows = compactAcc_.data();
  forEachOccupied([&](uint64_t pos) { __builtin_prefetch(acc + pos * rowAccBytes, 1); },
                  [&](uint64_t pos) {
                    const uint32_t row = table_.find(static_cast<uint32_t>(pos));
                    std::memcpy(acc + pos * rowAccBytes, rows + row * rowAccBytes, rowAccBytes);
                  });
  clearRows();
  compact_ = false;
}

Status PartitionAggregator::add(const uint32_t* positions, const void* values, int64_t count) {
  ZEN_CHECK_ARG(count >= 0, "negative entry count {}", count);
  if (count == 0) return Status::ok();
  ZEN_CHECK_ARG(positions != nullptr && values != nullptr,
                "{} push entries for part {} but no position or value buffer", count, part_);
  uint32_t maxPos = 0;
  for (int64_t i = 0; i < count; ++i) maxPos = std::max(maxPos, positions[i]);
  if (maxPos >= size_) {
    const int64_t bad =
        std::find_if(positions, positions + count, [&](uint32_t p) { return p >= size_; }) -
        positions;
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "corrupt push payload: entry {} of {} has local position {} but part {} "
                     "owns only {} positions",
                     bad, count, positions[bad], part_, size_);
  }

  if (compact_ && !staysCompact(count)) toDense();
  dispatchDataType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const auto* src = static_cast<const T*>(values);
    if (compact_) {
      // Room for every entry being new; the rows past the occupied ones are zero.
      const size_t need = static_cast<size_t>(occupied_ + count) * rowSize_ * accBytes_;
      if (compactAcc_.size() < need) compactAcc_.resize(need);
      auto* rows = reinterpret_cast<AccumulatorT<T>*>(compactAcc_.data());
      withRowSize(rowSize_, [&](auto rowSize) {
        occupied_ += compactAdd(positions, src, count, rowSize, &table_, rows, bits_.data());
      });
      return;
    }
    auto* acc = reinterpret_cast<AccumulatorT<T>*>(acc_.data());
    const int threads = pool_ == nullptr ? 1 : pool_->size();
    if (threads <= 1 || count * rowSize_ < kParallelMinElements) {
      withRowSize(rowSize_, [&](auto rowSize) {
        occupied_ += scatterAdd(positions, src, count, rowSize, 0, size_, acc, bits_.data());
      });
      return;
    }
    // Each task owns a 64-aligned range of positions: disjoint accumulators and words.
    const uint64_t span = (size_ + threads - 1) / threads;
    const uint64_t step = (span + 63) / 64 * 64;
    std::vector<int64_t> fresh(static_cast<size_t>(threads), 0);
    pool_->parallelFor(threads, [&](int64_t t) {
      const uint64_t lo = std::min<uint64_t>(static_cast<uint64_t>(t) * step, size_);
      const uint64_t hi = std::min<uint64_t>(lo + step, size_);
      if (lo < hi) {
        withRowSize(rowSize_, [&](auto rowSize) {
          fresh[t] = scatterAdd(positions, src, count, rowSize, lo, hi, acc, bits_.data());
        });
      }
    });
    for (int64_t f : fresh) occupied_ += f;
  });
  entriesAdded_ += count;
  return Status::ok();
}

}  // namespace zen
