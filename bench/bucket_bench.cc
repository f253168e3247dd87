// A sparse bucket's result split into its tensors' dense outputs (ops/cpu_sparse_bucket.h):
// the step that ends every sparse allreduce with a dense result, e.g. each top-k compressed
// gradient (zen.torch's Compression.topk asks for the dense tensor). One tensor of rows x
// rowSize fp32 whose result holds perMille/1000 of the rows (sorted, uniform, fixed seed);
// items are the tensor's rows. range(3): threads (a pool of that many; 1: none).
//   build/bench/zen_core_bench --benchmark_filter=BM_SplitDenseOutput
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "ops/cpu_sparse_bucket.h"

namespace zen::bench {
namespace {

// range(0): rows, range(1): elements per row, range(2): result rows per 1000, range(3):
// threads.
void BM_SplitDenseOutput(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int64_t rowSize = state.range(1);
  SparseTensor result;
  result.numRows = rows;
  result.rowSize = rowSize;
  result.dtype = DataType::kFloat32;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> perMille(0, 999);
  for (int64_t r = 0; r < rows; ++r) {
    if (perMille(rng) < state.range(2)) result.indices.push_back(r);
  }
  result.values.assign(result.indices.size() * static_cast<size_t>(rowSize) * sizeof(float),
                       std::byte{1});
  Response response;
  response.dtype = DataType::kFloat32;
  response.rowSize = rowSize;
  response.shapes = {TensorShape{rows, rowSize}};
  response.rowOffsets = {0};
  response.totalRows = rows;
  std::vector<float> dense(static_cast<size_t>(rows * rowSize));
  TensorEntry entry;
  entry.output =
      DenseView{dense.data(), DataType::kFloat32, TensorShape{rows, rowSize}, Device::cpu()};
  const std::vector<TensorEntry*> entries{&entry};
  std::unique_ptr<ThreadPool> pool;
  if (state.range(3) > 1) pool = std::make_unique<ThreadPool>(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    ops::SparseBucket::split(response, entries, result, pool.get());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.counters["kept"] = static_cast<double>(result.indices.size());
}

BENCHMARK(BM_SplitDenseOutput)
    ->ArgNames({"rows", "row", "per_mille", "threads"})
    ->ArgsProduct({{16'777'216}, {1}, {10, 40}, {1, 2}})  // a 4096 x 4096 layer's top-1% from
                                                          // 4 ranks: 1% to 4% in the union
    ->ArgsProduct({{1'444'000}, {8}, {8}, {1, 2}})        // DeepFM's embedding table
    ->ArgsProduct({{1'000'000}, {64}, {10}, {1, 2}})      // wider rows
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zen::bench
