// Algorithm 2 throughput: encode (occupancy bitmap + compaction of the aggregated rows) and
// decode (bitmap walk + inverse permutation + scatter into a dense output), in GB/s of
// encoded bytes, with memcpy of the same bytes as the floor.
//   build/bench/zen_core_bench --benchmark_filter=Bitmap
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/aggregator.h"
#include "core/hash_bitmap.h"

namespace zen::bench {
namespace {

constexpr int64_t kRows = 10'000'000;  // one server's |I_j| (n = 1), float32 rows of 1

// An aggregation with `permille` / 1000 of the part's positions occupied.
struct Aggregated {
  IndexMap map{kRows, 1, 3};
  PartitionAggregator agg;
  EncodedPart encoded;

  explicit Aggregated(int64_t permille) {
    std::mt19937_64 rng(7);
    std::vector<uint32_t> positions;
    for (int64_t p = 0; p < kRows; ++p) {
      if (static_cast<int64_t>(rng() % 1000) < permille)
        positions.push_back(static_cast<uint32_t>(p));
    }
    std::vector<float> values(positions.size(), 1.0f);
    if (!agg.reset(map, 0, DataType::kFloat32, 1).isOk() ||
        !agg.add(positions.data(), values.data(), static_cast<int64_t>(positions.size())).isOk() ||
        !encode(agg, 1.0, &encoded).isOk()) {
      std::abort();
    }
  }
};

void setBytes(benchmark::State& state, const EncodedPart& e) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(e.wireBytes()));
  state.counters["encoded_MB"] = static_cast<double>(e.wireBytes()) / 1e6;
}

void BM_BitmapEncode(benchmark::State& state) {
  Aggregated a(state.range(0));
  EncodedPart out;
  for (auto _ : state) {
    if (!encode(a.agg, 1.0, &out).isOk()) state.SkipWithError("encode failed");
    benchmark::DoNotOptimize(out.values.data());
  }
  setBytes(state, a.encoded);
}

void BM_BitmapDecodeDense(benchmark::State& state) {
  Aggregated a(state.range(0));
  std::vector<float> dense(kRows);
  const DenseView out{dense.data(), DataType::kFloat32, TensorShape{kRows}, Device::cpu()};
  for (auto _ : state) {
    const Status s =
        decodeToDense(a.map, 0, a.encoded.bitmap.data(), a.encoded.bitmap.size(),
                      a.encoded.values.data(), a.encoded.values.size(), DataType::kFloat32, 1, out);
    if (!s.isOk()) state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  setBytes(state, a.encoded);
}

void BM_BitmapMemcpyFloor(benchmark::State& state) {
  Aggregated a(state.range(0));
  std::vector<std::byte> src(a.encoded.wireBytes()), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  setBytes(state, a.encoded);
}

void bitmapArgs(benchmark::internal::Benchmark* b) {
  for (int64_t permille : {10, 100, 500}) b->Arg(permille);
  b->ArgName("density_permille")->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(0.2);
}

BENCHMARK(BM_BitmapEncode)->Apply(bitmapArgs);
BENCHMARK(BM_BitmapDecodeDense)->Apply(bitmapArgs);
BENCHMARK(BM_BitmapMemcpyFloor)->Apply(bitmapArgs);

}  // namespace
}  // namespace zen::bench
