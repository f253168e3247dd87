// Ordering the rows of a sparse output by index: the radix sort (core/radix_sort.h) that
// the zen scheme's sparse decode and coalesceRows run, against the std::sort of (index,
// row address) pairs they ran before. Distinct indices uniform in [0, 10^7) (the zen-bench
// shape), 10^4 to 10^6 of them; ns per entry.
//   build/bench/zen_core_bench --benchmark_filter=BM_SortIndices
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

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

BENCHMARK(BM_SortIndicesRadix)->RangeMultiplier(10)->Range(10'000, 1'000'000);
BENCHMARK(BM_SortIndicesStdSort)->RangeMultiplier(10)->Range(10'000, 1'000'000);

}  // namespace
}  // namespace zen::bench
