#include "core/radix_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

namespace zen {
namespace {

// The reference: std::stable_sort by key (values record the input order).
std::vector<KeyValue> reference(std::vector<KeyValue> items) {
  std::stable_sort(items.begin(), items.end(),
                   [](const KeyValue& a, const KeyValue& b) { return a.key < b.key; });
  return items;
}

void expectSortedLikeReference(const std::vector<KeyValue>& input) {
  std::vector<KeyValue> items = input;
  std::vector<KeyValue> scratch;
  radixSortByKey(&items, &scratch);
  const std::vector<KeyValue> want = reference(input);
  ASSERT_EQ(items.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(items[i].key, want[i].key) << "at " << i;
    ASSERT_EQ(items[i].value, want[i].value) << "at " << i << ", key " << want[i].key;
  }
}

// count entries with keys uniform in [0, bound), value = input position.
std::vector<KeyValue> randomItems(size_t count, uint64_t bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key(0, bound - 1);
  std::vector<KeyValue> items(count);
  for (size_t i = 0; i < count; ++i) items[i] = KeyValue{key(rng), i};
  return items;
}

TEST(RadixSort, EmptyAndSingle) {
  expectSortedLikeReference({});
  expectSortedLikeReference({{7, 1}});
  expectSortedLikeReference({{0, 1}});
}

TEST(RadixSort, RandomKeysOfEveryWidth) {
  // Bounds below, at and above digit boundaries, up to keys with the top bit set.
  const uint64_t bounds[] = {1,
                             2,
                             255,
                             256,
                             257,
                             65536,
                             10'000'000,
                             uint64_t{1} << 32,
                             (uint64_t{1} << 40) + 3,
                             std::numeric_limits<uint64_t>::max()};
  uint64_t seed = 1;
  for (uint64_t bound : bounds) {
    for (size_t count : {2, 3, 100, 4097, 100'000}) {
      SCOPED_TRACE(testing::Message() << "bound " << bound << ", count " << count);
      expectSortedLikeReference(randomItems(count, bound, seed++));
    }
  }
}

TEST(RadixSort, DuplicatesKeepInputOrder) {
  // 50,000 entries over 37 keys: long runs of equal keys, values must stay ascending in each.
  expectSortedLikeReference(randomItems(50'000, 37, 11));
  // All keys equal (every digit is shared: no pass runs).
  std::vector<KeyValue> same(1000);
  for (size_t i = 0; i < same.size(); ++i) same[i] = KeyValue{123456789, i};
  expectSortedLikeReference(same);
}

TEST(RadixSort, ExtremeKeysAndPresortedInputs) {
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  expectSortedLikeReference({{top, 0}, {0, 1}, {top, 2}, {top - 1, 3}, {0, 4}, {1, 5}});
  std::vector<KeyValue> ascending(5000);
  std::vector<KeyValue> descending(5000);
  for (size_t i = 0; i < ascending.size(); ++i) {
    ascending[i] = KeyValue{i * 977, i};
    descending[i] = KeyValue{(ascending.size() - i) * 977, i};
  }
  expectSortedLikeReference(ascending);
  expectSortedLikeReference(descending);
}

TEST(RadixSort, ReusesScratchAcrossCalls) {
  std::vector<KeyValue> scratch;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    // Sizes shrink and grow: stale scratch contents must not leak into the result.
    const std::vector<KeyValue> input = randomItems(seed % 2 == 0 ? 300 : 20'000, 1 << 20, seed);
    std::vector<KeyValue> items = input;
    radixSortByKey(&items, &scratch);
    const std::vector<KeyValue> want = reference(input);
    ASSERT_EQ(items.size(), want.size());
    EXPECT_TRUE(std::equal(
        items.begin(), items.end(), want.begin(),
        [](const KeyValue& a, const KeyValue& b) { return a.key == b.key && a.value == b.value; }));
  }
}

}  // namespace
}  // namespace zen
