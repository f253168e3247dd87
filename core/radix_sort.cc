// LSD radix sort of (key, value) pairs (see radix_sort.h).
//
// Steps:
//   1. one read of the keys: OR of all keys, so the passes stop at its highest set bit
//      (indices of a 10^7-row tensor take 3 passes, not 8);
//   2. one read for the histograms of all those digits at once;
//   3. per digit whose histogram is not a single bucket: exclusive prefix sums, then a stable
//      scatter from one buffer into the other (256 write streams, which stay in L1/L2).
// Every pass is O(count); std::sort's O(count log count) comparisons with their branch
// misses are what this replaces in the sparse output paths.
#include "core/radix_sort.h"

#include <array>
#include <cstddef>
#include <utility>

namespace zen {
namespace {

constexpr int kDigitBits = 8;
constexpr size_t kBuckets = size_t{1} << kDigitBits;
constexpr int kMaxDigits = 64 / kDigitBits;

size_t digitOf(uint64_t key, int d) {
  return static_cast<size_t>(key >> (d * kDigitBits)) & (kBuckets - 1);
}

}  // namespace

void radixSortByKey(std::vector<KeyValue>* items, std::vector<KeyValue>* scratch) {
  const size_t count = items->size();
  if (count < 2) return;
  uint64_t any = 0;
  for (const KeyValue& kv : *items) any |= kv.key;
  int digits = 0;
  while (digits < kMaxDigits && (any >> (digits * kDigitBits)) != 0) ++digits;

  // On the stack (16 KiB at most): no allocation per call.
  std::array<std::array<size_t, kBuckets>, kMaxDigits> histograms;
  for (int d = 0; d < digits; ++d) histograms[d].fill(0);
  for (const KeyValue& kv : *items) {
    for (int d = 0; d < digits; ++d) ++histograms[d][digitOf(kv.key, d)];
  }

  scratch->resize(count);
  for (int d = 0; d < digits; ++d) {
    std::array<size_t, kBuckets>& next = histograms[d];
    if (next[digitOf((*items)[0].key, d)] == count) continue;  // every key shares this digit
    size_t sum = 0;
    for (size_t& c : next) sum += std::exchange(c, sum);
    const KeyValue* src = items->data();
    KeyValue* dst = scratch->data();
    for (size_t i = 0; i < count; ++i) dst[next[digitOf(src[i].key, d)]++] = src[i];
    std::swap(*items, *scratch);
  }
}

}  // namespace zen
