#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/radix_sort.h"
#include "core/status.h"

namespace zen {

// Counting instead of sorting, for distinct keys of a known range [0, bound): a bitmap of the
// keys present with, per 64-bit word, the number of keys in the words before it. The rank of
// a key (its position in ascending order) is then that count plus a popcount, so a caller
// writes every entry straight to its sorted slot: two passes over the entries and one over
// bound / 64 words, against a sort's several passes of scattered 16-byte moves. Memory: 16
// bytes per 64 keys of the range, so it pays when the keys are not much sparser than that
// (worthIt); the zen scheme's sparse decode uses it, its indices being distinct by
// construction. Keep one object across calls to reuse the memory.
class DistinctKeyRanks {
 public:
  // True when the table (bound / 64 words) is at most kWordsPerKey words per key.
  static bool worthIt(size_t count, uint64_t bound);

  // Marks the keys of items[0, count) (values ignored). kInvalidArgument naming the first
  // key that is >= bound or repeats: the ranks would not be a permutation.
  Status build(const KeyValue* items, size_t count, uint64_t bound);

  // Position of `key`, one of the built keys, among them in ascending order.
  uint64_t rankOf(uint64_t key) const {
    const Word& w = words_[key >> 6];
    return w.before + popcount64(w.bits & ((uint64_t{1} << (key & 63)) - 1));
  }

 private:
  static constexpr uint64_t kWordsPerKey = 4;

  // The baseline ISA has no popcnt instruction, and __builtin_popcountll becomes a libgcc
  // call there: a branch-free bit count inline instead.
  static uint64_t popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (x * 0x0101010101010101ULL) >> 56;
  }

  // Bits and the keys before them side by side: one cache line per lookup.
  struct Word {
    uint64_t bits;
    uint64_t before;
  };
  std::vector<Word> words_;
};

}  // namespace zen
