#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/popcount.h"
#include "core/status.h"

namespace zen {

// Counting instead of sorting, for distinct keys of a known range [0, bound): a bitmap of the
// keys present with, per 64-bit word, the number of keys in the words before it. The rank of
// a key (its position in ascending order) is then that count plus a popcount, so a caller
// writes every entry straight to its sorted slot: two passes over the entries and one over
// bound / 64 words, against a sort's several passes of scattered 16-byte moves. Memory: 16
// bytes per 64 keys of the range, so it pays when the keys are not much sparser than that
// (worthIt); the zen scheme's sparse decode uses it, its indices being distinct by
// construction. Keep one object across calls to reuse the memory. The bit counts of build
// and forEachRank use the popcnt instruction where the CPU has it (chosen at construction).
class DistinctKeyRanks {
 public:
  // hardwarePopcount false forces the software count (tests compare the two).
  explicit DistinctKeyRanks(bool hardwarePopcount = cpuHasPopcount())
      : hardwarePopcount_(hardwarePopcount) {}

  // True when the table (bound / 64 words) is at most kWordsPerKey words per key.
  static bool worthIt(size_t count, uint64_t bound);

  // Marks keys[0, count). kInvalidArgument naming the first key that is >= bound or repeats:
  // the ranks would not be a permutation.
  Status build(const uint64_t* keys, size_t count, uint64_t bound);

  // The built keys in ascending order into out[0, count): a walk of the bitmap, so a caller
  // placing entries by rank (forEachRank) need not also scatter their keys.
  void writeSortedKeys(int64_t* out) const;

  // Position of `key`, one of the built keys, among them in ascending order.
  uint64_t rankOf(uint64_t key) const { return rankOf<SoftwarePopcount>(words_.data(), key); }

  // fn(i, rankOf(keys[i])) for i < count, in order: the loop a caller placing every entry
  // runs, with the popcnt instruction where there is one (fn is inlined into both versions,
  // so it adds no call per entry and no buffer of ranks). keys may be any subset of the built
  // ones, e.g. one part of them at a time.
  template <typename Fn>
  void forEachRank(const uint64_t* keys, size_t count, Fn&& fn) const {
    if (hardwarePopcount_) {
      forEachRankHardware(words_.data(), keys, count, fn);
    } else {
      forEachRankWith<SoftwarePopcount>(words_.data(), keys, count, fn);
    }
  }

 private:
  static constexpr uint64_t kWordsPerKey = 4;
  static constexpr size_t kPrefetchAhead = 16;

  // Bits and the keys before them side by side: one cache line per lookup.
  struct Word {
    uint64_t bits;
    uint64_t before;
  };

  template <typename Popcount>
  static uint64_t rankOf(const Word* words, uint64_t key) {
    const Word& w = words[key >> 6];
    return w.before + Popcount::count(w.bits & ((uint64_t{1} << (key & 63)) - 1));
  }

  template <typename Popcount, typename Fn>
  static inline __attribute__((always_inline)) void forEachRankWith(const Word* words,
                                                                    const uint64_t* keys,
                                                                    size_t count,
                                                                    Fn& fn) {
    // The keys come in hash order, so each lookup is a miss in a table of up to a few MB:
    // fetching the word kPrefetchAhead keys ahead overlaps those misses.
    const size_t ahead = count > kPrefetchAhead ? count - kPrefetchAhead : 0;
    size_t i = 0;
    for (; i < ahead; ++i) {
      __builtin_prefetch(&words[keys[i + kPrefetchAhead] >> 6]);
      fn(i, rankOf<Popcount>(words, keys[i]));
    }
    for (; i < count; ++i) fn(i, rankOf<Popcount>(words, keys[i]));
  }

  template <typename Fn>
  ZEN_TARGET_POPCNT static void forEachRankHardware(const Word* words,
                                                    const uint64_t* keys,
                                                    size_t count,
                                                    Fn& fn) {
    forEachRankWith<HardwarePopcount>(words, keys, count, fn);
  }

  bool hardwarePopcount_;
  std::vector<Word> words_;
};

}  // namespace zen
