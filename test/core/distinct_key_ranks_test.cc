#include "core/distinct_key_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace zen {
namespace {

// count distinct keys drawn uniformly from [0, bound) (a partial Fisher-Yates shuffle).
std::vector<uint64_t> distinctKeys(size_t count, uint64_t bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> all(bound);
  std::iota(all.begin(), all.end(), uint64_t{0});
  for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng() % (bound - i)]);
  all.resize(count);
  return all;
}

// The keys writeSortedKeys writes, with a sentinel after them that must stay untouched.
std::vector<int64_t> sortedKeysOf(const DistinctKeyRanks& ranks, size_t count) {
  std::vector<int64_t> out(count + 1, -7);
  ranks.writeSortedKeys(out.data());
  EXPECT_EQ(out.back(), -7) << "wrote past its " << count << " keys";
  out.pop_back();
  return out;
}

// Every key's rank must be its position in the std::sort order, and the sorted keys that order.
void expectRanksLikeSort(const std::vector<uint64_t>& keys, uint64_t bound) {
  DistinctKeyRanks ranks;
  ASSERT_TRUE(ranks.build(keys.data(), keys.size(), bound).isOk());
  std::vector<uint64_t> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sortedKeysOf(ranks, keys.size()), std::vector<int64_t>(sorted.begin(), sorted.end()));
  for (const uint64_t key : keys) {
    const auto want =
        static_cast<uint64_t>(std::lower_bound(sorted.begin(), sorted.end(), key) - sorted.begin());
    ASSERT_EQ(ranks.rankOf(key), want) << "key " << key << " of " << keys.size();
  }
}

TEST(DistinctKeyRanks, MatchesSortOrder) {
  uint64_t seed = 1;
  for (uint64_t bound : {1, 63, 64, 65, 1000, 4096, 100'003}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, static_cast<size_t>(bound / 3),
                         static_cast<size_t>(bound)}) {
      if (count > bound) continue;
      SCOPED_TRACE(testing::Message() << "bound " << bound << ", count " << count);
      expectRanksLikeSort(distinctKeys(count, bound, seed++), bound);
    }
  }
}

TEST(DistinctKeyRanks, EdgesOfTheRangeAndReuse) {
  DistinctKeyRanks ranks;
  const std::vector<uint64_t> edges = {999, 0, 64, 63};
  ASSERT_TRUE(ranks.build(edges.data(), edges.size(), 1000).isOk());
  EXPECT_EQ(ranks.rankOf(0), 0u);
  EXPECT_EQ(ranks.rankOf(63), 1u);
  EXPECT_EQ(ranks.rankOf(64), 2u);
  EXPECT_EQ(ranks.rankOf(999), 3u);
  // A second, smaller build on the same object forgets the first one's keys.
  const std::vector<uint64_t> again = {5, 2};
  ASSERT_TRUE(ranks.build(again.data(), again.size(), 10).isOk());
  EXPECT_EQ(ranks.rankOf(2), 0u);
  EXPECT_EQ(ranks.rankOf(5), 1u);
  EXPECT_EQ(sortedKeysOf(ranks, 2), (std::vector<int64_t>{2, 5}));
}

TEST(DistinctKeyRanks, RefusesRepeatsAndKeysOutOfRange) {
  DistinctKeyRanks ranks;
  const std::vector<uint64_t> repeat = {3, 70, 3};
  Status s = ranks.build(repeat.data(), repeat.size(), 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("key 3 (entry 2) repeats"), std::string::npos) << s.message();
  const std::vector<uint64_t> outside = {3, 100};
  s = ranks.build(outside.data(), outside.size(), 100);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("key 100 (entry 1) is outside [0, 100)"), std::string::npos)
      << s.message();
}

// forEachRank with the popcnt instruction (where this CPU has it) and with the software count must
// both equal rankOf, on random keys and on every key of a full range.
TEST(DistinctKeyRanks, ForEachRankMatchesRankOfWithEitherCount) {
  uint64_t seed = 100;
  for (uint64_t bound : {1, 64, 65, 1000, 1'444'000}) {
    for (size_t count : {size_t{1}, size_t{9}, static_cast<size_t>(bound / 7 + 1),
                         static_cast<size_t>(std::min<uint64_t>(bound, 20'000))}) {
      if (count > bound) continue;
      SCOPED_TRACE(testing::Message() << "bound " << bound << ", count " << count);
      const std::vector<uint64_t> keys = distinctKeys(count, bound, seed++);
      std::vector<uint64_t> expected(count);
      for (bool hardware : {true, false}) {
        if (hardware && !cpuHasPopcount()) continue;
        DistinctKeyRanks ranks(hardware);
        ASSERT_TRUE(ranks.build(keys.data(), keys.size(), bound).isOk());
        std::vector<uint64_t> got(count, ~uint64_t{0});
        size_t next = 0;
        ranks.forEachRank(keys.data(), keys.size(), [&](size_t i, uint64_t rank) {
          ASSERT_EQ(i, next++);
          got[i] = rank;
        });
        EXPECT_EQ(next, count);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(got[i], ranks.rankOf(keys[i]))
              << "hardware " << hardware << ", key " << keys[i];
        }
        if (hardware) {
          expected = got;
        } else if (cpuHasPopcount()) {
          EXPECT_EQ(got, expected);
        }
      }
      expectRanksLikeSort(keys, bound);
    }
  }
}

TEST(DistinctKeyRanks, WorthItOnlyWhenTheTableIsSmall) {
  EXPECT_TRUE(DistinctKeyRanks::worthIt(40'000, 10'000'000));   // 156,250 words, 3.9 per key
  EXPECT_FALSE(DistinctKeyRanks::worthIt(30'000, 10'000'000));  // 5.2 words per key
  EXPECT_TRUE(DistinctKeyRanks::worthIt(0, 63));
  EXPECT_FALSE(DistinctKeyRanks::worthIt(0, 64));
}

}  // namespace
}  // namespace zen
