#pragma once

// Walking a hash-bitmap part (Algorithm 2) or a list of local positions to the global indices
// they stand for, in order: the loops both the core decoders (core/hash_bitmap.cc) and the
// sparse allreduce's Pull (ops/sparse_allreduce_zen.cc) run. Positions go to indices in
// batches through core/feistel_batch.h (bit-identical to IndexMap::indexOf, without its
// per-index latency chain).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/feistel_batch.h"
#include "core/fixed_size.h"
#include "core/index_map.h"

namespace zen {

inline uint64_t load64le(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

// Calls fn(p) for every set bit p of a little-endian bitmap of `bytes` bytes, in order.
template <typename Fn>
void forEachSetBit(const uint8_t* bitmap, size_t bytes, Fn&& fn) {
  const size_t full = bytes / 8;
  for (size_t w = 0; w < full; ++w) {
    for (uint64_t m = load64le(bitmap + w * 8); m != 0; m &= m - 1) {
      fn(w * 64 + static_cast<uint64_t>(__builtin_ctzll(m)));
    }
  }
  uint64_t m = 0;
  for (size_t b = full * 8; b < bytes; ++b) m |= uint64_t{bitmap[b]} << (8 * (b - full * 8));
  for (; m != 0; m &= m - 1) fn(full * 64 + static_cast<uint64_t>(__builtin_ctzll(m)));
}

// Turns a stream of local positions of `part` into batches of global indices:
// fn(indices, n, first) gets indices[i] = map.indexOf(part, p) of the (first + i)-th position
// pushed, up to FeistelBatch::kBatch at a time. Call finish() after the last push().
template <typename Fn>
class PositionBatcher {
 public:
  PositionBatcher(const IndexMap& map, uint32_t part, Fn& fn) : batch_(map), part_(part), fn_(fn) {}

  void push(uint64_t p) {
    pos_[n_++] = p;
    if (n_ == FeistelBatch::kBatch) flush();
  }
  void finish() {
    if (n_ > 0) flush();
  }

 private:
  void flush() {
    batch_.indexOf(part_, pos_, idx_, n_);
    fn_(static_cast<const uint64_t*>(idx_), n_, first_);
    first_ += static_cast<int64_t>(n_);
    n_ = 0;
  }

  const IndexMapBatch batch_;
  const uint32_t part_;
  Fn& fn_;
  uint64_t pos_[FeistelBatch::kBatch];
  uint64_t idx_[FeistelBatch::kBatch];
  size_t n_ = 0;
  int64_t first_ = 0;
};

// fn(indices, n, first) over the set bits of a bitmap of `part`, in bit order (see
// PositionBatcher).
template <typename Fn>
void forEachSetBitIndex(
    const IndexMap& map, uint32_t part, const uint8_t* bitmap, size_t bytes, Fn&& fn) {
  PositionBatcher<Fn> batcher(map, part, fn);
  forEachSetBit(bitmap, bytes, [&](uint64_t p) { batcher.push(p); });
  batcher.finish();
}

// fn(indices, n, first) over positionOf(k) for k < count, in order (see PositionBatcher).
template <typename PositionOf, typename Fn>
void forEachPositionIndex(
    const IndexMap& map, uint32_t part, int64_t count, PositionOf&& positionOf, Fn&& fn) {
  PositionBatcher<Fn> batcher(map, part, fn);
  for (int64_t k = 0; k < count; ++k) batcher.push(positionOf(k));
  batcher.finish();
}

// dense[idx[i]] = row i of `rows` for i < n (rows of rowBytes, back to back).
inline void copyRowsTo(
    std::byte* dense, const uint64_t* idx, const std::byte* rows, size_t n, size_t rowBytes) {
  withRowBytes(rowBytes, [&](auto bytes) {
    for (size_t i = 0; i < n; ++i) std::memcpy(dense + idx[i] * bytes, rows + i * bytes, bytes);
  });
}

}  // namespace zen
