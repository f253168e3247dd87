// Response cache and bit vector: keys, LRU, bit reuse, identical bits on every rank, the AND.

#include "controller/response_cache.h"

#include <gtest/gtest.h>

#include <random>

#include "controller/cache_bits.h"
#include "controller/validation.h"
#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::makeRequest;
using testing::sparseRequest;

Response responseFor(const Request& q, int size = 1) {
  TableEntry e;
  e.byRank.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    Request mine = q;
    mine.rank = r;
    e.byRank[static_cast<size_t>(r)] = mine;
  }
  e.posted = size;
  return buildResponse(q.name, e, std::vector<bool>(static_cast<size_t>(size)));
}

void putRequest(ResponseCache* cache, const Request& q) {
  cache->put(responseFor(q), CacheKey::of(q));
}

TEST(ResponseCache, MissHitAndInvalid) {
  ResponseCache cache(8);
  const Request q = sparseRequest(0, "emb", 1000, 8);
  EXPECT_EQ(cache.lookup(q).state, ResponseCache::State::kMiss);
  putRequest(&cache, q);
  auto found = cache.lookup(q);
  EXPECT_EQ(found.state, ResponseCache::State::kHit);
  EXPECT_EQ(found.bit, 0);
  EXPECT_EQ(cache.peek(0).tensorNames[0], "emb");

  // Every keyed field makes a different request stale.
  Request changed = q;
  changed.shape = TensorShape({1001, 8});
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  changed = q;
  changed.dtype = DataType::kFloat16;
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  changed = q;
  changed.device = Device::cuda(0);
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  changed = q;
  changed.reduceOp = ReduceOp::kAverage;
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  changed = q;
  changed.op = OpType::kAllreduce;
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  changed = q;
  changed.rootRank = 3;
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kInvalid);
  // The rank is not part of the key: the entry is this rank's own anyway.
  changed = q;
  changed.rank = 5;
  EXPECT_EQ(cache.lookup(changed).state, ResponseCache::State::kHit);
}

TEST(ResponseCache, AlltoallIsKeyedOnThisRanksSplits) {
  ResponseCache cache(8);
  Request q = makeRequest(0, "a2a", OpType::kAlltoall, DataType::kFloat32, TensorShape({4, 2}));
  q.splits = {3, 1};
  const Response r = responseFor(q, 2);
  ASSERT_EQ(r.type, ResponseType::kAlltoall) << r.errorMessage;
  EXPECT_TRUE(isCacheable(r.type));
  cache.put(r, CacheKey::of(q));
  EXPECT_EQ(cache.lookup(q).state, ResponseCache::State::kHit);
  EXPECT_EQ(cache.peek(0).splits, (std::vector<int64_t>{3, 1, 3, 1}));
  Request moved = q;
  moved.splits = {2, 2};  // the same rows, split differently: the plan is stale
  EXPECT_EQ(cache.lookup(moved).state, ResponseCache::State::kInvalid);
  moved.splits = {};
  EXPECT_EQ(cache.lookup(moved).state, ResponseCache::State::kInvalid);
  EXPECT_TRUE(isCacheable(ResponseType::kReducescatter));
}

TEST(ResponseCache, BitsAreLowestFreeAndHolesAreReused) {
  ResponseCache cache(8);
  for (const char* n : {"a", "b", "c"}) putRequest(&cache, makeRequest(0, n));
  EXPECT_EQ(cache.numBits(), 3);
  cache.erase(cache.lookup(makeRequest(0, "b")).bit);
  EXPECT_FALSE(cache.hasBit(1));
  EXPECT_EQ(cache.lookup(makeRequest(0, "b")).state, ResponseCache::State::kMiss);
  EXPECT_EQ(cache.numBits(), 3);
  putRequest(&cache, makeRequest(0, "d"));
  EXPECT_EQ(cache.lookup(makeRequest(0, "d")).bit, 1);
  putRequest(&cache, makeRequest(0, "e"));
  EXPECT_EQ(cache.lookup(makeRequest(0, "e")).bit, 3);
  // Re-putting a cached name keeps its bit.
  putRequest(&cache, makeRequest(0, "a"));
  EXPECT_EQ(cache.lookup(makeRequest(0, "a")).bit, 0);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(ResponseCache, EvictsLeastRecentlyUsed) {
  ResponseCache cache(3);
  for (const char* n : {"a", "b", "c"}) putRequest(&cache, makeRequest(0, n));
  cache.get(cache.lookup(makeRequest(0, "a")).bit);  // a is now the most recent
  putRequest(&cache, makeRequest(0, "d"));           // evicts b
  EXPECT_EQ(cache.lookup(makeRequest(0, "b")).state, ResponseCache::State::kMiss);
  EXPECT_EQ(cache.lookup(makeRequest(0, "d")).bit, 1);  // b's bit
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(ResponseCache, CapacityZeroDisables) {
  ResponseCache cache(0);
  EXPECT_FALSE(cache.enabled());
  putRequest(&cache, makeRequest(0, "a"));
  EXPECT_EQ(cache.lookup(makeRequest(0, "a")).state, ResponseCache::State::kMiss);
  EXPECT_EQ(cache.numBits(), 0);
}

TEST(ResponseCache, SplitResponseYieldsSingleTensorEntries) {
  Response fused;
  fused.type = ResponseType::kAllgather;
  fused.tensorNames = {"x", "y"};
  fused.shapes = {TensorShape({3, 2}), TensorShape({5})};
  fused.gatherRows = {1, 2, 4, 1};
  const Response y = splitResponse(fused, 1);
  EXPECT_EQ(y.tensorNames, std::vector<std::string>{"y"});
  EXPECT_EQ(y.shapes, std::vector<TensorShape>{TensorShape({5})});
  EXPECT_EQ(y.gatherRows, (std::vector<int64_t>{4, 1}));

  Response sparse;
  sparse.type = ResponseType::kSparseAllreduce;
  sparse.tensorNames = {"a", "b"};
  sparse.shapes = {TensorShape({10, 4}), TensorShape({7, 4})};
  sparse.rowOffsets = {0, 10};
  sparse.totalRows = 17;
  const Response b = splitResponse(sparse, 1);
  EXPECT_EQ(b.rowOffsets, std::vector<int64_t>{0});
  EXPECT_EQ(b.totalRows, 7);
}

// n caches fed the same operations (with per-rank keys differing, as devices do) assign the
// same bit to every name through puts, gets, erases and evictions.
TEST(ResponseCache, SameOperationsGiveSameBitsOnEveryRank) {
  constexpr int kRanks = 5;
  std::vector<ResponseCache> caches;
  for (int r = 0; r < kRanks; ++r) caches.emplace_back(16);
  std::mt19937 rng(11);
  for (int step = 0; step < 2000; ++step) {
    const std::string name = "t" + std::to_string(rng() % 40);
    const int action = static_cast<int>(rng() % 3);
    for (int r = 0; r < kRanks; ++r) {
      Request q = makeRequest(r, name);
      q.device = Device::cuda(r);  // each rank's own GPU
      auto& cache = caches[static_cast<size_t>(r)];
      const auto found = cache.lookup(q);
      if (action == 0) {
        putRequest(&cache, q);
      } else if (action == 1 && found.state == ResponseCache::State::kHit) {
        cache.get(found.bit);
      } else if (action == 2 && found.state != ResponseCache::State::kMiss) {
        cache.erase(found.bit);
      }
    }
    for (int r = 1; r < kRanks; ++r) {
      ASSERT_EQ(caches[r].numBits(), caches[0].numBits());
      for (int b = 0; b < caches[0].numBits(); ++b) {
        ASSERT_EQ(caches[r].hasBit(b), caches[0].hasBit(b));
        if (caches[0].hasBit(b)) {
          ASSERT_EQ(caches[r].peek(b).tensorNames, caches[0].peek(b).tensorNames)
              << "step " << step;
        }
      }
    }
  }
  EXPECT_GT(caches[0].evictions(), 0);
}

TEST(CacheBits, AndYieldsCommonHitsStaleEntriesAndStatus) {
  constexpr int kBits = 70;  // spans two words
  LocalCacheBits a, b, c;
  a.hits = {0, 5, 64, 69};
  b.hits = {5, 64, 69, 3};
  c.hits = {5, 69, 64};
  b.invalid = {7};
  b.invalidInQueue = true;
  b.uncachedInQueue = true;
  c.shutdown = true;
  BitVector v = encodeCacheBits(a, kBits);
  EXPECT_EQ(v.size(), cacheBitWords(kBits));
  EXPECT_EQ(v.size(), 3u);  // 4 status + 2 * 70 bits
  andInto(&v, encodeCacheBits(b, kBits));
  andInto(&v, encodeCacheBits(c, kBits));
  auto g = decodeCacheBits(v, kBits);
  ASSERT_TRUE(g.isOk());
  EXPECT_TRUE(g.value().shutdown);
  EXPECT_TRUE(g.value().uncachedInQueue);
  EXPECT_TRUE(g.value().invalidInQueue);
  EXPECT_FALSE(g.value().someoneJoined);
  EXPECT_EQ(g.value().commonHits, (std::vector<int>{5, 64, 69}));
  EXPECT_EQ(g.value().invalid, std::vector<int>{7});
}

TEST(CacheBits, QuietRanksMeanFastPathAndLengthIsChecked) {
  LocalCacheBits quiet;
  auto g = decodeCacheBits(encodeCacheBits(quiet, 0), 0);
  ASSERT_TRUE(g.isOk());
  EXPECT_FALSE(g.value().shutdown);
  EXPECT_FALSE(g.value().uncachedInQueue);
  EXPECT_TRUE(g.value().commonHits.empty());
  LocalCacheBits joined;
  joined.joined = true;
  EXPECT_TRUE(decodeCacheBits(encodeCacheBits(joined, 3), 3).value().someoneJoined);
  EXPECT_FALSE(decodeCacheBits(encodeCacheBits(quiet, 100), 3).isOk());
}

}  // namespace
}  // namespace zen::controller
