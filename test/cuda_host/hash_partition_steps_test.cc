// Algorithm 1's GPU steps (cuda/hash_partition_steps.h) run on the CPU: the claim from
// several threads at once (the same atomics race as on the GPU), the cub calls replaced by
// std algorithms with the same results (stable radix sort = stable sort by key, select =
// filter, scan = prefix sum). The emulated lists must equal the CPU partitioner's as sets,
// with bit-identical rows, every output slot written, and the overflow fallback exercised.
// This checks the kernels' logic and layout math on machines without a GPU; the kernels
// themselves are checked against the CPU on a GPU by test/gpu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/hash_partitioner.h"
#include "cuda/gpu_plan.h"
#include "cuda/hash_partition_steps.h"
#include "test/common/sparse_inputs.h"

namespace zen::cuda {
namespace {

using ull = unsigned long long;

constexpr uint32_t kPoisonPosition = 0xffffffffu;  // never a position (chunk < 2^32 - 1)
constexpr unsigned char kPoisonByte = 0x7f;        // 0x7f7f... is no sum of small integers

struct Emulated {
  PushLists lists;
  int attempts = 0;
  int64_t overflowed = 0;
  int64_t spilled = 0;
  int64_t badEntry = -1;
};

// The GPU pipeline of gpu_hash_partitioner.cu, step for step, on `threads` CPU threads.
Emulated emulate(const IndexMap& map,
                 const HashPartitionOptions& options,
                 const SparseTensor& in,
                 int threads) {
  Emulated result;
  const int n = map.numParts();
  const int64_t nnz = in.nnz();
  const HashPartitionPlan plan = planHashPartition(nnz, n, options);
  const HashFamily hashes(std::clamp(options.hashFunctions, 1, HashFamily::kMaxFunctions),
                          options.seed);
  std::vector<ull> slots(plan.slots);
  std::vector<ull> counters(hp::countersFor(n));
  std::vector<ull> members(std::max<int64_t>(nnz, 1));
  std::vector<ull> serial;
  std::vector<uint32_t> occList;
  int64_t r2 = plan.r2;
  for (;;) {  // A and B
    ++result.attempts;
    std::fill(slots.begin(), slots.end(), hp::kEmptySlot);
    serial.assign(n * r2, 0);
    std::fill(counters.begin(), counters.end(), 0);
    counters[hp::kBadEntry] = ~0ULL;
    const hp::ClaimArgs args{map,
                             hashes,
                             in.indices.data(),
                             static_cast<uint64_t>(plan.r1),
                             static_cast<uint64_t>(r2),
                             slots.data(),
                             serial.data(),
                             counters.data(),
                             members.data()};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int64_t i = t; i < nnz; i += threads) hp::claimEntry(args, i);
      });
    }
    for (auto& th : pool) th.join();
    occList.clear();
    for (int64_t s = 0; s < plan.slots; ++s) {
      if (slots[s] != hp::kEmptySlot) occList.push_back(static_cast<uint32_t>(s));
    }
    counters[hp::kOccupied] = occList.size();
    if (counters[hp::kBadEntry] != ~0ULL) {
      result.badEntry = static_cast<int64_t>(counters[hp::kBadEntry]);
      return result;
    }
    int64_t maxNeed = 0;
    for (int p = 0; p < n; ++p) {
      maxNeed = std::max<int64_t>(maxNeed, counters[hp::kSerialCounts + p]);
    }
    if (maxNeed <= r2) break;
    for (int p = 0; p < n; ++p) {
      result.overflowed +=
          std::max<int64_t>(0, static_cast<int64_t>(counters[hp::kSerialCounts + p]) - r2);
    }
    r2 = nextSerialCapacity(r2, maxNeed, nnz);
  }
  const auto dupMembers = static_cast<int64_t>(counters[hp::kDupMembers]);
  const auto occupied = static_cast<int64_t>(occList.size());
  std::vector<int64_t> spillStart(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    spillStart[p + 1] = spillStart[p] + static_cast<int64_t>(counters[hp::kSerialCounts + p]);
  }
  const int64_t spillTotal = spillStart[n];
  EXPECT_LE(dupMembers + spillTotal, nnz) << "members must fit the nnz-sized buffer";

  // C. Spill: gather, stable sort by key (cub's radix sort is stable), heads, scan.
  std::vector<ull> keys(spillTotal);
  std::vector<uint32_t> entries(spillTotal);
  for (int64_t t = 0; t < n * r2; ++t) {
    hp::gatherSpill(r2, serial.data(), counters.data(), spillStart.data(), keys.data(),
                    entries.data(), t);
  }
  std::vector<int64_t> order(spillTotal);
  for (int64_t j = 0; j < spillTotal; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  std::vector<ull> sortedKeys(spillTotal);
  std::vector<uint32_t> sortedEntries(spillTotal);
  for (int64_t j = 0; j < spillTotal; ++j) {
    sortedKeys[j] = keys[order[j]];
    sortedEntries[j] = entries[order[j]];
  }
  std::vector<int64_t> headRank(spillTotal + 1, 0);
  for (int64_t j = 0; j < spillTotal; ++j) {
    headRank[j + 1] = headRank[j] + hp::spillHead(sortedKeys.data(), spillTotal, j);
  }
  EXPECT_EQ(hp::spillHead(sortedKeys.data(), spillTotal, spillTotal), 0);

  // D. Layout.
  std::vector<int64_t> offsets(n + 1), occBefore(n + 1), spillBase(n);
  const hp::Layout layout{occList.data(),
                          occupied,
                          static_cast<uint64_t>(plan.r1),
                          n,
                          spillTotal,
                          spillStart.data(),
                          headRank.data(),
                          offsets.data(),
                          occBefore.data(),
                          spillBase.data()};
  for (int p = 0; p <= n; ++p) hp::occupiedBefore(layout, p);
  result.spilled = hp::prefixOffsets(layout);

  // E. Scatter into poisoned outputs.
  const int64_t capacity = occupied + spillTotal;
  const size_t rowBytes = in.rowBytes();
  std::vector<uint32_t> positions(capacity, kPoisonPosition);
  std::vector<std::byte> values(capacity * rowBytes, std::byte{kPoisonByte});
  for (int64_t k = 0; k < occupied; ++k) {
    const hp::SlotRow r = hp::slotRow(layout, slots.data(), k);
    positions[r.outRow] = r.position;
    if (r.source >= 0) {
      std::memcpy(values.data() + r.outRow * rowBytes, in.values.data() + r.source * rowBytes,
                  rowBytes);
    }
  }
  for (int64_t d = 0; d < dupMembers; ++d) hp::dupMemberRow(layout, members.data(), d);
  for (int64_t j = 0; j < spillTotal; ++j) {
    hp::spillMemberRow(layout, sortedKeys.data(), sortedEntries.data(), positions.data(),
                       members.data() + dupMembers, j);
  }

  // F. Sort members, find groups, sum each in entry order.
  const int64_t memberCount = dupMembers + spillTotal;
  std::sort(members.begin(), members.begin() + memberCount);
  std::vector<int64_t> starts;
  for (int64_t j = 0; j < memberCount; ++j) {
    if (hp::isGroupHead(members.data(), j)) starts.push_back(j);
  }
  dispatchDataType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto* src = reinterpret_cast<const T*>(in.values.data());
    auto* dst = reinterpret_cast<T*>(values.data());
    for (size_t g = 0; g < starts.size(); ++g) {
      const int64_t end = g + 1 < starts.size() ? starts[g + 1] : memberCount;
      for (int64_t e = 0; e < in.rowSize; ++e) {
        hp::sumGroupElement(src, in.rowSize, members.data(), starts[g], end, e, dst);
      }
    }
  });

  result.lists.offsets = offsets;
  result.lists.dtype = in.dtype;
  result.lists.rowSize = in.rowSize;
  const int64_t total = offsets[n];
  EXPECT_LE(total, capacity);
  positions.resize(total);
  values.resize(total * rowBytes);
  result.lists.positions = std::move(positions);
  result.lists.values = std::move(values);
  return result;
}

// Owner -> position -> row bytes; fails on a repeated position or a poisoned slot.
using ListSet = std::map<std::pair<int, uint32_t>, std::vector<std::byte>>;

ListSet asSet(const PushLists& lists) {
  ListSet set;
  for (int p = 0; p < lists.numParts(); ++p) {
    for (int64_t i = lists.offsets[p]; i < lists.offsets[p + 1]; ++i) {
      EXPECT_NE(lists.positions[i], kPoisonPosition) << "position " << i << " never written";
      const auto* row = lists.row(i);
      const bool inserted = set.emplace(std::make_pair(p, lists.positions[i]),
                                        std::vector<std::byte>(row, row + lists.rowBytes()))
                                .second;
      EXPECT_TRUE(inserted) << "owner " << p << " lists position " << lists.positions[i]
                            << " twice";
    }
  }
  return set;
}

Emulated expectSameAsCpu(const IndexMap& map,
                         const HashPartitionOptions& options,
                         const SparseTensor& in,
                         int threads = 4) {
  HashPartitioner cpu(map, options, nullptr);
  PushLists want;
  const Status s = cpu.partition(in.view(), &want);
  EXPECT_TRUE(s.isOk()) << s.toString();
  Emulated got = emulate(map, options, in, threads);
  EXPECT_EQ(got.badEntry, -1);
  EXPECT_EQ(got.lists.offsets.size(), want.offsets.size());
  for (int p = 0; p + 1 < static_cast<int>(want.offsets.size()); ++p) {
    EXPECT_EQ(got.lists.count(p), want.count(p)) << "owner " << p;
  }
  EXPECT_TRUE(asSet(got.lists) == asSet(want)) << "lists differ from the CPU partitioner's";
  return got;
}

std::vector<int64_t> zipfWithRepeats(int64_t rows, int64_t count, std::mt19937_64& rng) {
  std::vector<int64_t> idx(count);
  for (auto& i : idx) i = testing::zipfDraw(rows, 1.2, rng);
  return idx;
}

// Random non-integer values: the summation order must match the CPU's exactly.
SparseTensor withRandomFloats(SparseTensor t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  dispatchDataType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_integral_v<T>) {
      auto* v = reinterpret_cast<T*>(t.values.data());
      for (size_t e = 0; e < t.values.size() / sizeof(T); ++e) {
        v[e] = fromAccumulator<T>(static_cast<AccumulatorT<T>>(u(rng)));
      }
    }
  });
  return t;
}

TEST(HashPartitionSteps, UniformDistinctIndices) {
  std::mt19937_64 rng(11);
  const IndexMap map(1'000'003, 8, 21);
  const auto in =
      testing::makeSparse(testing::distinctIndices(1'000'003, 40'000, testing::Skew::kUniform, rng),
                          1'000'003, 3, DataType::kFloat32, rng);
  const Emulated got = expectSameAsCpu(map, {}, in);
  EXPECT_EQ(got.attempts, 1);
}

TEST(HashPartitionSteps, ZipfRepeatsSumInEntryOrderForEveryDtype) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                         DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    SCOPED_TRACE(dataTypeName(dtype));
    std::mt19937_64 rng(12);
    const IndexMap map(200'000, 7, 22);
    auto in = testing::makeSparse(zipfWithRepeats(200'000, 30'000, rng), 200'000, 2, dtype, rng);
    expectSameAsCpu(map, {}, withRandomFloats(std::move(in), rng));
  }
}

TEST(HashPartitionSteps, OneIndexRepeatedEverywhere) {
  std::mt19937_64 rng(13);
  const IndexMap map(1000, 4, 23);
  const auto in =
      testing::makeSparse(std::vector<int64_t>(5000, 0), 1000, 5, DataType::kInt32, rng);
  const Emulated got = expectSameAsCpu(map, {}, in, 8);
  EXPECT_EQ(got.lists.total(), 1);
}

TEST(HashPartitionSteps, TinyMemoryOverflowsAndRedoesWithoutLoss) {
  std::mt19937_64 rng(14);
  const IndexMap map(500'000, 4, 24);
  HashPartitionOptions options;
  options.memoryFactor = 0.0001;  // r1 = 8 slots per owner
  options.serialFraction = 0;     // r2 = 64 entries per owner
  auto idx = testing::distinctIndices(500'000, 20'000, testing::Skew::kUniform, rng);
  for (int i = 0; i < 2000; ++i) idx.push_back(idx[rng() % idx.size()]);
  const auto in = testing::makeSparse(idx, 500'000, 1, DataType::kFloat32, rng);
  const Emulated got = expectSameAsCpu(map, options, in);
  EXPECT_GE(got.attempts, 2);
  EXPECT_GT(got.overflowed, 0);
  EXPECT_GT(got.spilled, 0);
}

TEST(HashPartitionSteps, OneProbeSpillsMoreButLosesNothing) {
  std::mt19937_64 rng(15);
  const IndexMap map(100'000, 16, 25);
  HashPartitionOptions options;
  options.hashFunctions = 1;
  options.memoryFactor = 1.0;
  auto idx = zipfWithRepeats(100'000, 20'000, rng);
  const auto in = testing::makeSparse(idx, 100'000, 4, DataType::kBFloat16, rng);
  const Emulated got = expectSameAsCpu(map, options, in);
  EXPECT_GT(got.spilled, 0);
}

TEST(HashPartitionSteps, EdgeShapes) {
  std::mt19937_64 rng(16);
  for (int parts : {1, 3, 16}) {
    for (int64_t rows : {int64_t{1}, int64_t{9}, int64_t{1000}}) {
      SCOPED_TRACE(::testing::Message() << parts << " parts, " << rows << " rows");
      const IndexMap map(rows, parts, 26);
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < 3 * rows; ++i) idx.push_back(static_cast<int64_t>(rng() % rows));
      idx.push_back(0);  // index 0 is an ordinary index
      expectSameAsCpu(map, {}, testing::makeSparse(idx, rows, 1, DataType::kInt64, rng), 3);
    }
  }
}

TEST(HashPartitionSteps, OutOfRangeIndexReportsTheFirstEntry) {
  std::mt19937_64 rng(17);
  const IndexMap map(1000, 4, 27);
  std::vector<int64_t> idx(5000);
  for (auto& i : idx) i = static_cast<int64_t>(rng() % 1000);
  idx[4000] = 1000;
  idx[1234] = -1;
  const auto in = testing::makeSparse(idx, 1000, 1, DataType::kFloat32, rng);
  EXPECT_EQ(emulate(map, {}, in, 4).badEntry, 1234);
}

}  // namespace
}  // namespace zen::cuda
