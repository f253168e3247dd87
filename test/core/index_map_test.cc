#include "core/index_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/feistel_batch.h"
#include "core/hash.h"

namespace zen {
namespace {

TEST(FeistelPermutation, IsABijectionOnEveryDomainSize) {
  for (uint64_t domain : {1ull, 2ull, 3ull, 7ull, 8ull, 100ull, 1000ull, 4097ull, 65536ull}) {
    const FeistelPermutation perm(domain, 42);
    std::vector<bool> seen(domain, false);
    for (uint64_t x = 0; x < domain; ++x) {
      const uint64_t y = perm.forward(x);
      ASSERT_LT(y, domain);
      ASSERT_FALSE(seen[y]) << "domain " << domain << " collision at " << x;
      seen[y] = true;
      ASSERT_EQ(perm.inverse(y), x);
    }
  }
}

// The CPU's batched evaluation must be bit-identical to the shared scalar definition.
TEST(FeistelBatch, MatchesTheScalarPermutationAndIndexMap) {
  std::mt19937_64 rng(5);
  for (uint64_t rows : {1ull, 2ull, 3ull, 8ull, 9ull, 1000ull, 4097ull, 65536ull, 65537ull,
                        10'000'000ull, (1ull << 31) + 5, (1ull << 40) - 3, (1ull << 62) + 1}) {
    for (int parts : {1, 3, 16}) {
      const IndexMap map(rows, parts, rows * 31 + parts);
      const IndexMapBatch batch(map);
      std::vector<uint64_t> idx(1000);
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i < rows ? i : rng() % rows;
      idx.back() = rows - 1;
      std::vector<uint64_t> perm(idx.size());
      batch.permute(idx.data(), perm.data(), idx.size());
      std::vector<uint64_t> pos(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) {
        uint64_t owner = 0;
        batch.split(perm[i], &owner, &pos[i]);
        const IndexMap::Place want = map.place(idx[i]);
        ASSERT_EQ(owner, want.owner) << "rows " << rows << " idx " << idx[i];
        ASSERT_EQ(pos[i], want.pos) << "rows " << rows << " idx " << idx[i];
      }
      for (int p = 0; p < parts; ++p) {
        std::vector<uint64_t> ps, got;
        for (size_t i = 0; i < idx.size(); ++i) {
          if (map.owner(idx[i]) == static_cast<uint32_t>(p)) ps.push_back(pos[i]);
        }
        got.resize(ps.size());
        batch.indexOf(static_cast<uint32_t>(p), ps.data(), got.data(), ps.size());
        for (size_t i = 0; i < ps.size(); ++i) ASSERT_EQ(got[i], map.indexOf(p, ps[i]));
      }
    }
  }
}

// The SIMD passes (where the CPU has them) against the scalar ones: every length mod 4, and
// domains just above a power of two, where most indices walk more than once.
TEST(FeistelBatch, SimdPassesMatchTheScalarOnes) {
  if (feistelForwardPass() == nullptr || feistelInversePass() == nullptr) {
    GTEST_SKIP() << "this CPU has no SIMD Feistel pass";
  }
  std::mt19937_64 rng(11);
  for (uint64_t domain : {1ull, 2ull, 5ull, 17ull, 1000ull, 65537ull, 1'000'000ull, 1'444'000ull,
                          (1ull << 33) + 1, (1ull << 62) + 1}) {
    const FeistelPermutation perm(domain, domain * 7 + 1);
    const FeistelBatch simd(perm);
    const FeistelBatch scalar(perm, false);
    for (size_t count : {size_t{1}, size_t{3}, size_t{4}, size_t{255}, size_t{256}, size_t{1001}}) {
      std::vector<uint64_t> in(count);
      for (uint64_t& x : in) x = rng() % domain;
      std::vector<uint64_t> a(count), b(count), c(count), d(count);
      simd.forward(in.data(), a.data(), count);
      scalar.forward(in.data(), b.data(), count);
      ASSERT_EQ(a, b) << "domain " << domain << " count " << count;
      ASSERT_EQ(b[0], perm.forward(in[0]));
      simd.inverse(a.data(), c.data(), count);
      scalar.inverse(b.data(), d.data(), count);
      ASSERT_EQ(c, d) << "domain " << domain << " count " << count;
      ASSERT_EQ(c, in) << "domain " << domain << " count " << count;
    }
  }
}

TEST(FeistelPermutation, SeedChangesThePermutation) {
  const FeistelPermutation a(1 << 20, 1), b(1 << 20, 2);
  int same = 0;
  for (uint64_t x = 0; x < 1000; ++x) same += a.forward(x) == b.forward(x);
  EXPECT_LT(same, 5);
}

TEST(IndexMap, PlaceAndIndexOfAreInverse) {
  for (int parts : {1, 2, 3, 7, 16}) {
    for (uint64_t rows : {1ull, 5ull, 17ull, 1000ull, 12345ull}) {
      const IndexMap map(rows, parts, 7);
      uint64_t total = 0;
      for (int p = 0; p < parts; ++p) total += map.partSize(p);
      ASSERT_EQ(total, rows);
      for (uint64_t idx = 0; idx < rows; ++idx) {
        const auto pl = map.place(idx);
        ASSERT_LT(pl.owner, static_cast<uint32_t>(parts));
        ASSERT_LT(pl.pos, map.partSize(pl.owner));
        ASSERT_EQ(map.indexOf(pl.owner, pl.pos), idx);
      }
    }
  }
}

TEST(IndexMap, EveryPartButTheTailIsAWholeNumberOfBytes) {
  const IndexMap map(10'000'001, 16, 3);
  uint64_t bitmapBytes = 0;
  for (int p = 0; p < 16; ++p) bitmapBytes += (map.partSize(p) + 7) / 8;
  EXPECT_EQ(bitmapBytes, (10'000'001ull + 7) / 8);
}

TEST(IndexMap, OwnersAreBalancedEvenForContiguousSkewedIndices) {
  // All indices in the first 1% of the range: range partitioning would give one owner all.
  const int parts = 16;
  const IndexMap map(10'000'000, parts, 11);
  std::vector<int64_t> load(parts, 0);
  for (uint64_t idx = 0; idx < 100'000; ++idx) ++load[map.owner(idx)];
  const auto mx = *std::max_element(load.begin(), load.end());
  EXPECT_LT(static_cast<double>(mx) / (100'000.0 / parts), 1.1);
}

TEST(HashFamily, ProbesAreIndependentAndInRange) {
  const HashFamily h(3, 9);
  int agree = 0;
  for (uint64_t idx = 0; idx < 10000; ++idx) {
    for (int i = 0; i < 3; ++i) ASSERT_LT(h.probe(i, idx, 1000), 1000u);
    agree += h.probe(0, idx, 1000) == h.probe(1, idx, 1000);
  }
  EXPECT_LT(agree, 50);  // ~10 expected by chance
}

}  // namespace
}  // namespace zen
