// Ranks of distinct keys by counting (see distinct_key_ranks.h).
//
// Steps: zero bound / 64 words; set bit k for every key k, refusing a key out of range or
// already set; one prefix pass writes each word's count of keys before it. writeSortedKeys
// walks the set bits word by word. The loops that
// count bits (the prefix pass here, forEachRank in the header) are compiled twice, with the
// software count and with popcnt (core/popcount.h): without the instruction, the counts
// are most of the work.
#include "core/distinct_key_ranks.h"

namespace zen {
namespace {

// Templates over the word type, which is private to DistinctKeyRanks: build passes its
// words_.data() and the type is deduced, never named here.
template <typename Popcount, typename Word>
inline __attribute__((always_inline)) void prefixCounts(Word* words, size_t n) {
  uint64_t before = 0;
  for (size_t i = 0; i < n; ++i) {
    words[i].before = before;
    before += Popcount::count(words[i].bits);
  }
}

template <typename Word>
void prefixSoftware(Word* words, size_t n) {
  prefixCounts<SoftwarePopcount>(words, n);
}

template <typename Word>
ZEN_TARGET_POPCNT void prefixHardware(Word* words, size_t n) {
  prefixCounts<HardwarePopcount>(words, n);
}

}  // namespace

bool DistinctKeyRanks::worthIt(size_t count, uint64_t bound) {
  return bound / 64 <= kWordsPerKey * static_cast<uint64_t>(count);
}

Status DistinctKeyRanks::build(const uint64_t* keys, size_t count, uint64_t bound) {
  words_.assign(static_cast<size_t>(bound / 64 + 1), Word{0, 0});
  for (size_t i = 0; i < count; ++i) {
    const uint64_t key = keys[i];
    ZEN_CHECK_ARG(key < bound, "key {} (entry {}) is outside [0, {})", key, i, bound);
    uint64_t& bits = words_[key >> 6].bits;
    const uint64_t bit = uint64_t{1} << (key & 63);
    ZEN_CHECK_ARG((bits & bit) == 0, "key {} (entry {}) repeats; the keys must be distinct", key,
                  i);
    bits |= bit;
  }
  if (hardwarePopcount_) {
    prefixHardware(words_.data(), words_.size());
  } else {
    prefixSoftware(words_.data(), words_.size());
  }
  return Status::ok();
}

void DistinctKeyRanks::writeSortedKeys(int64_t* out) const {
  for (size_t w = 0; w < words_.size(); ++w) {
    for (uint64_t bits = words_[w].bits; bits != 0; bits &= bits - 1) {
      *out++ = static_cast<int64_t>((w << 6) + static_cast<size_t>(__builtin_ctzll(bits)));
    }
  }
}

}  // namespace zen
