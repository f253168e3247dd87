// Nonzero extraction on the CPU (core/nonzero.h): the dense scheme's sparse output and the
// GPU kernel's reference. A dense [rows x rowSize] fp32 tensor whose rows are nonzero with
// probability density/1000 (uniform, fixed seed); items are input rows.
//   build/bench/zen_core_bench --benchmark_filter=BM_ExtractNonzeroRows
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/nonzero.h"

namespace zen::bench {
namespace {

// range(0): rows, range(1): elements per row, range(2): nonzero rows per 1000.
void BM_ExtractNonzeroRows(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int64_t rowSize = state.range(1);
  std::vector<float> dense(static_cast<size_t>(rows * rowSize), 0.0f);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> perMille(0, 999);
  for (int64_t r = 0; r < rows; ++r) {
    if (perMille(rng) < state.range(2)) dense[static_cast<size_t>(r * rowSize)] = 1.0f;
  }
  const DenseView view{dense.data(), DataType::kFloat32, TensorShape{rows, rowSize}, Device::cpu()};
  SparseTensor out;
  for (auto _ : state) {
    benchmark::DoNotOptimize(extractNonzeroRows(view, &out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows);
  state.counters["kept"] = static_cast<double>(out.nnz());
}

BENCHMARK(BM_ExtractNonzeroRows)
    ->ArgNames({"rows", "row", "per_mille"})
    ->Args({10'000'000, 1, 10})
    ->Args({10'000'000, 1, 100})
    ->Args({1'000'000, 8, 100})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace zen::bench
