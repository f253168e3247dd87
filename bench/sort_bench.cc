// Ordering the rows of a sparse output by index: the radix sort (core/radix_sort.h) that
// the zen scheme's sparse decode and coalesceRows run, against the std::sort of (index,
// row address) pairs they ran before. Distinct indices uniform in [0, 10^7) (the zen-bench
// shape), 10^4 to 10^6 of them; ns per entry.
//   build/bench/zen_core_bench --benchmark_filter=BM_SortIndices
// And the counting path's sorted keys (DistinctKeyRanks::writeSortedKeys, read off its
// bitmap) over the DeepFM embedding table's 1,444,000 rows, from 6,000 keys (4 words per key,
// the least the decode counts) to 360,000; ns per key.
//   build/bench/zen_core_bench --benchmark_filter=BM_DistinctKeysSorted
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "core/distinct_key_ranks.h"
#include "core/radix_sort.h"

namespace zen::bench {
namespace {

constexpr uint64_t kRows = 10'000'000;

std::vector<KeyValue> distinctIndices(int64_t count) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> all(kRows);
  for (uint64_t i = 0; i < kRows; ++i) all[i] = i;
  std::vector<KeyValue> items(static_cast<size_t>(count));
  for (size_t i = 0; i < items.size(); ++i) {
    std::swap(all[i], all[i + rng() % (kRows - i)]);
    items[i] = KeyValue{all[i], i};
  }
  return items;
}

void setPerEntry(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_SortIndicesRadix(benchmark::State& state) {
  const std::vector<KeyValue> input = distinctIndices(state.range(0));
  std::vector<KeyValue> items;
  std::vector<KeyValue> scratch;
  for (auto _ : state) {
    items = input;
    radixSortByKey(&items, &scratch);
    benchmark::DoNotOptimize(items.data());
  }
  setPerEntry(state);
}

void BM_SortIndicesStdSort(benchmark::State& state) {
  const std::vector<KeyValue> input = distinctIndices(state.range(0));
  std::vector<std::pair<int64_t, uint64_t>> items;
  for (auto _ : state) {
    items.clear();
    for (const KeyValue& kv : input) items.emplace_back(static_cast<int64_t>(kv.key), kv.value);
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    benchmark::DoNotOptimize(items.data());
  }
  setPerEntry(state);
}

void BM_DistinctKeysSorted(benchmark::State& state) {
  constexpr uint64_t kTableRows = 1'444'000;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> all(kTableRows);
  for (uint64_t i = 0; i < kTableRows; ++i) all[i] = i;
  const auto count = static_cast<size_t>(state.range(0));
  for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng() % (kTableRows - i)]);
  DistinctKeyRanks ranks;
  if (!ranks.build(all.data(), count, kTableRows).isOk()) state.SkipWithError("build failed");
  std::vector<int64_t> sorted(count);
  for (auto _ : state) {
    ranks.writeSortedKeys(sorted.data());
    benchmark::DoNotOptimize(sorted.data());
  }
  if (!std::is_sorted(sorted.begin(), sorted.end())) state.SkipWithError("not sorted");
  setPerEntry(state);
}

BENCHMARK(BM_SortIndicesRadix)->RangeMultiplier(10)->Range(10'000, 1'000'000);
BENCHMARK(BM_SortIndicesStdSort)->RangeMultiplier(10)->Range(10'000, 1'000'000);
BENCHMARK(BM_DistinctKeysSorted)->Arg(6'000)->Arg(10'000)->Arg(30'000)->Arg(100'000)->Arg(360'000);

}  // namespace
}  // namespace zen::bench
