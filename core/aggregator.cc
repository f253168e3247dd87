// Server-side aggregation of Balanced Parallelism (ALGORITHMS.md §5 step 3).
//
// Steps for server j, per step:
//   1. reset: |I_j| x rowSize accumulators to zero (only last step's rows when the layout is
//      unchanged), occupancy bitmap to zero.
//   2. add, once per sending rank: check every local position < |I_j| (a corrupt payload is
//      rejected before anything is written), then acc[pos] += row in the accumulator type
//      and set bit pos. With a pool, tasks own disjoint 64-aligned position ranges, so no
//      two threads touch the same accumulator or bitmap word.
// Nothing goes on the wire here: the input is the (n - 1) received Push lists of
// count * (4 + rowBytes) bytes each, plus this rank's own list.
#include "core/aggregator.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace zen {
namespace {

// Below this many element updates a single thread is faster than waking the pool.
constexpr int64_t kParallelMinElements = 1 << 16;

template <typename T>
void scatterAdd(const uint32_t* positions,
                const T* values,
                int64_t count,
                int64_t rowSize,
                uint64_t lo,
                uint64_t hi,
                AccumulatorT<T>* acc,
                uint64_t* bits) {
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t pos = positions[i];
    if (pos < lo || pos >= hi) continue;
    bits[pos >> 6] |= uint64_t{1} << (pos & 63);
    AccumulatorT<T>* dst = acc + pos * static_cast<uint64_t>(rowSize);
    const T* src = values + i * rowSize;
    for (int64_t e = 0; e < rowSize; ++e) dst[e] += toAccumulator<AccumulatorT<T>>(src[e]);
  }
}

}  // namespace

Status PartitionAggregator::reset(const IndexMap& map,
                                  uint32_t part,
                                  DataType dtype,
                                  int64_t rowSize) {
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

  const bool sameLayout = size == size_ && rowSize == rowSize_ && accBytes == accBytes_ &&
                          acc_.size() == size * rowAccBytes && bits_.size() == words;
  if (sameLayout && occupied() * 8 < static_cast<int64_t>(size)) {
    // Sparse last step: clear only the rows it used.
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t m = bits_[w]; m != 0; m &= m - 1) {
        const uint64_t pos = w * 64 + static_cast<uint64_t>(__builtin_ctzll(m));
        std::memset(acc_.data() + pos * rowAccBytes, 0, rowAccBytes);
      }
      bits_[w] = 0;
    }
  } else {
    acc_.resize(size * rowAccBytes);
    std::fill(acc_.begin(), acc_.end(), std::byte{0});
    bits_.assign(words, 0);
  }
  part_ = part;
  size_ = size;
  dtype_ = dtype;
  rowSize_ = rowSize;
  accBytes_ = accBytes;
  entriesAdded_ = 0;
  return Status::ok();
}

int64_t PartitionAggregator::occupied() const {
  int64_t n = 0;
  for (uint64_t w : bits_) n += __builtin_popcountll(w);
  return n;
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

  dispatchDataType(dtype_, [&](auto tag) {
    using T = decltype(tag);
    auto* acc = reinterpret_cast<AccumulatorT<T>*>(acc_.data());
    const auto* src = static_cast<const T*>(values);
    const int threads = pool_ == nullptr ? 1 : pool_->size();
    if (threads <= 1 || count * rowSize_ < kParallelMinElements) {
      scatterAdd(positions, src, count, rowSize_, 0, size_, acc, bits_.data());
      return;
    }
    // Each task owns a 64-aligned range of positions: disjoint accumulators and words.
    const uint64_t span = (size_ + threads - 1) / threads;
    const uint64_t step = (span + 63) / 64 * 64;
    pool_->parallelFor(threads, [&](int64_t t) {
      const uint64_t lo = std::min<uint64_t>(static_cast<uint64_t>(t) * step, size_);
      const uint64_t hi = std::min<uint64_t>(lo + step, size_);
      if (lo < hi) scatterAdd(positions, src, count, rowSize_, lo, hi, acc, bits_.data());
    });
  });
  entriesAdded_ += count;
  return Status::ok();
}

}  // namespace zen
