// Algorithm 1 against the straw-man and a plain sort-by-owner, with memcpy of the same input
// bytes as the floor. Counters: ns per index, scratch bytes, and spill/loss rates.
//   build/bench/zen_core_bench --benchmark_filter=Partition
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "bench/bench_inputs.h"
#include "core/hash_partitioner.h"
#include "core/sort_partitioner.h"
#include "core/strawman_partitioner.h"

namespace zen::bench {
namespace {

constexpr int kParts = 16;

void setCounters(benchmark::State& state, const PartitionStats& stats, int64_t nnz) {
  state.SetItemsProcessed(state.iterations() * nnz);
  state.counters["ns_per_index"] =
      benchmark::Counter(static_cast<double>(state.iterations() * nnz),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["scratch_MB"] = static_cast<double>(stats.scratchBytes) / 1e6;
  state.counters["spill_pct"] = 100.0 * static_cast<double>(stats.spilled) / nnz;
  state.counters["lost_pct"] = 100.0 * static_cast<double>(stats.lost) / nnz;
}

// Args: nnz, density in units of 0.1%, threads.
void BM_PartitionZen(benchmark::State& state) {
  const auto& in = sparseInput(state.range(0), state.range(1) / 1000.0);
  ThreadPool pool(static_cast<int>(state.range(2)));
  const IndexMap map(in.numRows, kParts, 1);
  HashPartitioner partitioner(map, {}, &pool);
  PushLists out;
  PartitionStats stats;
  // One untimed call first: the partitioner keeps its scratch across calls (a training loop
  // partitions every step), so the timed calls measure the steady state, not first touch.
  if (!partitioner.partition(in.view(), &out, &stats).isOk()) state.SkipWithError("failed");
  for (auto _ : state) {
    if (!partitioner.partition(in.view(), &out, &stats).isOk()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(out.positions.data());
  }
  setCounters(state, stats, in.nnz());
}

void BM_PartitionSort(benchmark::State& state) {
  const auto& in = sparseInput(state.range(0), state.range(1) / 1000.0);
  const IndexMap map(in.numRows, kParts, 1);
  PushLists out;
  PartitionStats stats;
  for (auto _ : state) {
    if (!sortPartition(map, in.view(), &out, &stats).isOk()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(out.positions.data());
  }
  setCounters(state, stats, in.nnz());
}

// The straw-man at load 0.4 (memory = |G| at 40% density), as in Appendix A.
void BM_PartitionStrawman(benchmark::State& state) {
  const auto& in = sparseInput(state.range(0), state.range(1) / 1000.0);
  const IndexMap map(in.numRows, kParts, 1);
  const int64_t slotsPerPart = static_cast<int64_t>(in.nnz() / 0.4 / kParts) + 1;
  PushLists out;
  PartitionStats stats;
  for (auto _ : state) {
    if (!strawmanPartition(map, in.view(), slotsPerPart, 2, &out, &stats).isOk()) {
      state.SkipWithError("failed");
    }
    benchmark::DoNotOptimize(out.positions.data());
  }
  setCounters(state, stats, in.nnz());
}

// The floor: copying the input's index and value bytes once.
void BM_PartitionMemcpyFloor(benchmark::State& state) {
  const auto& in = sparseInput(state.range(0), state.range(1) / 1000.0);
  std::vector<int64_t> indices(in.nnz());
  std::vector<std::byte> values(in.values.size());
  for (auto _ : state) {
    std::memcpy(indices.data(), in.indices.data(), indices.size() * sizeof(int64_t));
    std::memcpy(values.data(), in.values.data(), values.size());
    benchmark::ClobberMemory();
  }
  setCounters(state, PartitionStats{}, in.nnz());
}

void partitionArgs(benchmark::internal::Benchmark* b, bool threads) {
  for (int64_t nnz : {10'000, 100'000, 1'000'000, 10'000'000}) {
    for (int64_t density : {1, 10, 100}) {  // 0.1%, 1%, 10%
      if (threads) {
        b->Args({nnz, density, 1})->Args({nnz, density, 2});
      } else {
        b->Args({nnz, density, 1});
      }
    }
  }
  b->ArgNames({"nnz", "d_permille", "threads"})->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  b->UseRealTime();
}

// Ablation of Algorithm 1's knobs at nnz = 10^6, d = 1%, 2 threads: k probes and the
// parallel-memory factor r1 / (nnz / n). Spill to serial memory and time move against memory.
void BM_PartitionZenAblation(benchmark::State& state) {
  const auto& in = sparseInput(1'000'000, 0.01);
  ThreadPool pool(2);
  const IndexMap map(in.numRows, kParts, 1);
  HashPartitionOptions options;
  options.hashFunctions = static_cast<int>(state.range(0));
  options.memoryFactor = static_cast<double>(state.range(1)) / 10.0;
  HashPartitioner partitioner(map, options, &pool);
  PushLists out;
  PartitionStats stats;
  if (!partitioner.partition(in.view(), &out, &stats).isOk()) state.SkipWithError("failed");
  for (auto _ : state) {
    if (!partitioner.partition(in.view(), &out, &stats).isOk()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(out.positions.data());
  }
  setCounters(state, stats, in.nnz());
}

BENCHMARK(BM_PartitionZen)->Apply([](auto* b) { partitionArgs(b, true); });
BENCHMARK(BM_PartitionZenAblation)
    ->ArgsProduct({{2, 3, 4}, {10, 15, 20, 40}})
    ->ArgNames({"k", "factor_x10"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.2);
BENCHMARK(BM_PartitionSort)->Apply([](auto* b) { partitionArgs(b, false); });
BENCHMARK(BM_PartitionStrawman)->Apply([](auto* b) { partitionArgs(b, false); });
BENCHMARK(BM_PartitionMemcpyFloor)->Apply([](auto* b) { partitionArgs(b, false); });

}  // namespace
}  // namespace zen::bench
