// The sparse allreduce contract (sparse_allreduce_test.cc) for ranks as threads: in-process at
// 1, 2, 3, 4 and 7 ranks over the whole case matrix, TCP over 127.0.0.1 on a subset; and the
// byte counts against core/traffic_model.h's closed forms (in-process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>

#include "core/aggregator.h"
#include "core/traffic_model.h"
#include "ops/sparse_allreduce.h"
#include "test/core/reference.h"
#include "test/ops/sparse_allreduce_test.h"

namespace zen::ops::testing {
namespace {

namespace ref = ::zen::reference;

constexpr Scheme kSchemes[] = {Scheme::kZen, Scheme::kAgSparse, Scheme::kDense, Scheme::kHc,
                               Scheme::kBlocks};

std::vector<SparseParam> params(Backend backend, std::initializer_list<int> ranks, Coverage c) {
  std::vector<SparseParam> out;
  for (Scheme s : kSchemes) {
    for (int n : ranks) out.push_back(SparseParam{TransportParam{backend, n}, s, c});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    InProcess,
    SparseAllreduceTest,
    ::testing::ValuesIn(params(Backend::kInProcess, {1, 2, 3, 4, 7}, Coverage::kFull)),
    sparseParamName);

INSTANTIATE_TEST_SUITE_P(
    Tcp,
    SparseAllreduceTest,
    ::testing::ValuesIn(params(Backend::kTcp, {2, 3, 4, 7}, Coverage::kSubset)),
    sparseParamName);

struct RankBytes {
  std::vector<uint64_t> sent, received;
  int64_t outputNnz = 0;
};

// Runs one call of `scheme` on n in-process ranks with the given inputs; per-rank bytes.
RankBytes measure(Scheme scheme, const std::vector<SparseTensor>& inputs) {
  const int n = static_cast<int>(inputs.size());
  RankBytes bytes;
  bytes.sent.assign(n, 0);
  bytes.received.assign(n, 0);
  std::mutex mu;
  RankOptions options;
  runRanks(TransportParam{Backend::kInProcess, n}, options, [&](Transport& t) {
    SparseAllreduceOptions o;
    o.transport = &t;
    o.input = inputs[t.rank()].view();
    o.scheme = scheme;
    SparseAllreduceResult result;
    const Status s = sparseAllreduce(o, &result);
    ASSERT_TRUE(s.isOk()) << s.toString();
    EXPECT_EQ(result.stats.bytesSent, t.counters().totalSent());
    std::lock_guard<std::mutex> lock(mu);
    bytes.sent[t.rank()] = result.stats.bytesSent;
    bytes.received[t.rank()] = result.stats.bytesReceived;
    bytes.outputNnz = result.stats.outputNnz;
    if (t.rank() == 0 && scheme != Scheme::kDense) {
      EXPECT_TRUE(ref::sparseMatches(result.sparse, ref::denseSum(ref::views(inputs))));
    }
  });
  return bytes;
}

std::vector<SparseTensor> uniformRanks(int n, int64_t numRows, int64_t nnz, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SparseTensor> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(
        ref::makeRank(rng, ref::uniformIndices(rng, numRows, nnz), numRows, 1, DataType::kFloat32));
  }
  return ranks;
}

// ALGORITHMS.md §4-5: zen's bytes per rank are the closed form of Balanced Parallelism with
// each Pull part in its smallest encoding (bpZenTraffic; n = 8, |G| = 10^6, d = 1%, fp32 rows
// of 1: aggregated parts of ~8 %, Elias-Fano), within 5% on every rank, both directions (the
// headers and call summaries are the difference), and below the paper's hash-bitmap Pull.
TEST(SparseAllreduceTraffic, ZenBytesMatchClosedForm) {
  const int n = 8;
  const int64_t numRows = 1000000;
  const int64_t nnz = numRows / 100;
  const std::vector<SparseTensor> inputs = uniformRanks(n, numRows, nnz, 5);
  const RankBytes bytes = measure(Scheme::kZen, inputs);
  TrafficInputs in;
  in.n = n;
  in.numRows = numRows;
  in.rankNnz = static_cast<double>(nnz);
  in.aggregatedNnz = static_cast<double>(bytes.outputNnz);
  in.rowBytes = 4;
  in.indexBytes = 4;
  const double model = bpZenTraffic(in).total();
  EXPECT_LT(model, 0.9 * bpHashBitmapTraffic(in).total());
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(static_cast<double>(bytes.sent[r]), model, 0.05 * model) << "rank " << r;
    EXPECT_NEAR(static_cast<double>(bytes.received[r]), model, 0.05 * model) << "rank " << r;
  }
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    for (uint64_t b : {bytes.sent[r], bytes.received[r]}) {
      worst = std::max(worst, std::abs(static_cast<double>(b) / model - 1));
    }
  }
  std::printf(
      "zen n=%d |G|=%lld d=1%%: closed form %.0f B/rank; rank 0 sent %llu, received "
      "%llu; worst rank off by %.2f%% (aggregated nnz %lld)\n",
      n, static_cast<long long>(numRows), model, static_cast<unsigned long long>(bytes.sent[0]),
      static_cast<unsigned long long>(bytes.received[0]), 100 * worst,
      static_cast<long long>(bytes.outputNnz));
}

// Zen's Pull sends each part in its smallest encoding: COO or Elias-Fano when the aggregate is
// very sparse (far below the ceil(|G| / 8) bitmap bytes), dense rows when every row is present
// (no bitmap either), Elias-Fano at a sparse aggregate (5 % per rank: parts of ~19 %) and the
// hash bitmap at a dense one (40 %: ~87 %), each as bpZenTraffic's smallest part.
TEST(SparseAllreduceTraffic, ZenPullPicksTheSmallestEncoding) {
  const int n = 4;
  const int64_t numRows = 100000;
  const double bitmapBytes = (n - 1.0) / n * numRows / 8;  // what a bitmap Pull receives
  // 10 rows per rank: 40 aggregated rows cost 40 x 8 bytes as COO.
  const RankBytes sparse = measure(Scheme::kZen, uniformRanks(n, numRows, 10, 8));
  for (int r = 0; r < n; ++r) EXPECT_LT(static_cast<double>(sparse.received[r]), 0.1 * bitmapBytes);
  // Every row on every rank: Pull receives (n - 1) / n of the dense rows and no bitmap.
  const int64_t all = numRows;
  const RankBytes dense = measure(Scheme::kZen, uniformRanks(n, numRows, all, 9));
  TrafficInputs in;
  in.n = n;
  in.numRows = numRows;
  in.rankNnz = static_cast<double>(all);
  in.aggregatedNnz = static_cast<double>(all);
  const double withBitmap = bpHashBitmapTraffic(in).total();
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(static_cast<double>(dense.received[r]), withBitmap - bitmapBytes,
                0.01 * withBitmap);
  }
  for (const int64_t nnz : {numRows / 20, numRows * 2 / 5}) {
    const RankBytes bytes = measure(Scheme::kZen, uniformRanks(n, numRows, nnz, 10));
    in.rankNnz = static_cast<double>(nnz);
    in.aggregatedNnz = static_cast<double>(bytes.outputNnz);
    const double model = bpZenTraffic(in).total();
    for (int r = 0; r < n; ++r) {
      EXPECT_NEAR(static_cast<double>(bytes.received[r]), model, 0.03 * model)
          << nnz << " rows per rank, rank " << r;
    }
  }
}

// AGsparse receives (n - 1) x every rank's COO: linear in n (8-byte indices on the wire).
TEST(SparseAllreduceTraffic, AgSparseBytesGrowLinearlyWithRanks) {
  const int64_t numRows = 100000;
  const int64_t nnz = 1000;
  std::vector<double> perRank;
  for (int n : {2, 4, 8}) {
    const RankBytes bytes = measure(Scheme::kAgSparse, uniformRanks(n, numRows, nnz, 6));
    TrafficInputs in;
    in.n = n;
    in.numRows = numRows;
    in.rankNnz = static_cast<double>(nnz);
    in.rowBytes = 4;
    in.indexBytes = 8;
    const double model = agSparseTraffic(in).total();
    for (int r = 0; r < n; ++r) {
      EXPECT_NEAR(static_cast<double>(bytes.received[r]), model, 0.02 * model);
      EXPECT_NEAR(static_cast<double>(bytes.sent[r]), model, 0.02 * model);
    }
    perRank.push_back(static_cast<double>(bytes.received[0]));
  }
  EXPECT_NEAR(perRank[1] / perRank[0], 3.0, 0.05);  // (4 - 1) / (2 - 1)
  EXPECT_NEAR(perRank[2] / perRank[0], 7.0, 0.1);   // (8 - 1) / (2 - 1)
}

// The dense scheme moves the ring's 2 (n - 1) / n of the dense tensor whatever the density.
TEST(SparseAllreduceTraffic, DenseBytesAreTheRing) {
  const int n = 4;
  const int64_t numRows = 20000;
  const RankBytes bytes = measure(Scheme::kDense, uniformRanks(n, numRows, 10, 7));
  const double model = denseAllreduceTraffic(n, numRows, 4).total();  // each direction
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(static_cast<double>(bytes.sent[r]), model, 0.01 * model);
    EXPECT_NEAR(static_cast<double>(bytes.received[r]), model, 0.01 * model);
  }
}

// zen's server sums a part in compact rows while its pushed entries are few against |I_j|
// and in the |I_j|-row array otherwise, switching mid-step (PartitionAggregator): calls
// below, at and above the switch, and one where only the last rank pushes many, through
// one workspace on real ranks, each against the dense reference (exact: integer values).
TEST(ZenAggregationPaths, CallsAcrossTheCompactDenseSwitchMatchTheReference) {
  const int64_t numRows = 200000;  // |I_j| about numRows / n
  for (const TransportParam transport :
       {TransportParam{Backend::kInProcess, 4}, TransportParam{Backend::kTcp, 3}}) {
    const int n = transport.ranks;
    const int64_t limit = numRows / n / PartitionAggregator::kCompactFactor;
    struct Call {
      DataType dtype;
      bool denseOutput;
      std::vector<int64_t> perRank;  // entries per rank (before its duplicates)
    };
    std::vector<Call> calls;
    for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
      calls.push_back(Call{dtype, false, std::vector<int64_t>(n, limit / (2 * n))});  // compact
      calls.push_back(Call{dtype, true, std::vector<int64_t>(n, 4 * limit)});         // dense
      std::vector<int64_t> lastMany(n, limit / (4 * n));  // switches at the last rank's list
      lastMany.back() = 6 * limit;
      calls.push_back(Call{dtype, false, lastMany});
      std::vector<int64_t> one(n, 0);  // empty lists but one entry
      one[1 % n] = 1;
      calls.push_back(Call{dtype, false, one});
    }
    std::vector<std::vector<SparseTensor>> inputs;
    std::mt19937_64 rng(31);
    for (const Call& c : calls) {
      std::vector<SparseTensor> ranks;
      for (int r = 0; r < n; ++r) {
        std::vector<int64_t> idx = ref::zipfIndices(rng, numRows, c.perRank[r]);
        ref::addDuplicates(rng, &idx, c.perRank[r] / 10);
        ranks.push_back(ref::makeRank(rng, std::move(idx), numRows, 3, c.dtype));
      }
      inputs.push_back(std::move(ranks));
    }
    RankOptions options;
    options.timeoutSeconds = 20.0;
    runRanks(transport, options, [&](Transport& t) {
      SparseAllreduceWorkspace workspace;
      for (size_t k = 0; k < calls.size(); ++k) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " call " << k);
        SparseAllreduceOptions o;
        o.transport = &t;
        o.input = inputs[k][t.rank()].view();
        o.scheme = Scheme::kZen;
        o.workspace = &workspace;
        o.denseOutput = calls[k].denseOutput;
        SparseAllreduceResult result;
        const Status s = sparseAllreduce(o, &result);
        ASSERT_TRUE(s.isOk()) << s.toString();
        const ref::DenseSum sum = ref::denseSum(ref::views(inputs[k]));
        if (calls[k].denseOutput) {
          EXPECT_TRUE(ref::denseMatches(result.dense.data(), sum, 1, 0.0));
        } else {
          EXPECT_TRUE(ref::sparseMatches(result.sparse, sum, 1, 0.0));
        }
      }
    });
  }
}

}  // namespace
}  // namespace zen::ops::testing
