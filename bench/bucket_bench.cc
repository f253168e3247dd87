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
#include "ops/dense_rows.h"

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

// zen's dense decode writing a fused bucket's tensors in place (ops/dense_rows.h): rows of
// 16,777,216 x fp32 at random indices (hash order, as a Pull part arrives) into the bucket as
// range(1) tensors of equal rows; range(0) rows per 1000. Items are the rows copied.
void BM_DenseRowsCopy(benchmark::State& state) {
  constexpr int64_t kRows = 16'777'216;
  const int64_t tensors = state.range(1);
  std::vector<float> memory(static_cast<size_t>(kRows));
  std::vector<ops::DensePiece> pieces;
  for (int64_t t = 0; t < tensors; ++t) {
    const int64_t first = t * (kRows / tensors);
    const int64_t rows = t + 1 == tensors ? kRows - first : kRows / tensors;
    pieces.push_back(ops::DensePiece{first, rows, reinterpret_cast<std::byte*>(&memory[first])});
  }
  const ops::DenseRows dense(std::move(pieces), sizeof(float));
  std::mt19937_64 rng(11);
  std::vector<uint64_t> idx(static_cast<size_t>(kRows * state.range(0) / 1000));
  for (uint64_t& i : idx) i = rng() % kRows;
  const std::vector<float> values(idx.size(), 1.0f);
  for (auto _ : state) {
    dense.copyRows(idx.data(), reinterpret_cast<const std::byte*>(values.data()), idx.size());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(idx.size()));
}

BENCHMARK(BM_DenseRowsCopy)
    ->ArgNames({"per_mille", "tensors"})
    ->ArgsProduct({{40}, {1, 2, 4, 16, 64}})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_SplitDenseOutput)
    ->ArgNames({"rows", "row", "per_mille", "threads"})
    ->ArgsProduct({{16'777'216}, {1}, {10, 40}, {1, 2}})  // a 4096 x 4096 layer's top-1% from
                                                          // 4 ranks: 1% to 4% in the union
    ->ArgsProduct({{1'444'000}, {8}, {8}, {1, 2}})        // DeepFM's embedding table
    ->ArgsProduct({{1'000'000}, {64}, {10}, {1, 2}})      // wider rows
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zen::bench
