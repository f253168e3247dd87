// The rounds a sparse allreduce makes (ops/call_summary.h): the call summary rides in the first
// exchange of zen and blocks (Push) and agsparse (the gather), so zen and blocks enter 2
// collectives per call and agsparse 1; hc and dense send it alone first. A wrapper transport
// records every collective each rank enters. With the summary folded, the dispatcher's guarantees
// still hold at 4 ranks: a rank with another row size, dtype or scheme, or an out-of-range index,
// is the same kInvalidArgument on every rank, after the first exchange and nothing more.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/sparse_allreduce.h"
#include "test/core/reference.h"
#include "test/ops/sparse_allreduce_test.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

namespace ref = ::zen::reference;

constexpr int kRanks = 4;
constexpr int64_t kNumRows = 100;

// Forwards to a real transport and records the name of every call, in order.
class RecordingTransport final : public Transport {
 public:
  explicit RecordingTransport(Transport& inner)
      : Transport(inner.rank(), inner.size(), inner.timeoutSeconds()), inner_(inner) {}
  const char* backendName() const override { return inner_.backendName(); }
  const std::vector<std::string>& calls() const { return calls_; }
  void clear() { calls_.clear(); }

 protected:
  Status doSend(int peer, const void* data, size_t bytes, uint32_t tag) override {
    calls_.emplace_back("send");
    return inner_.send(peer, data, bytes, tag);
  }
  Status doRecv(int peer, void* data, size_t bytes, uint32_t tag) override {
    calls_.emplace_back("recv");
    return inner_.recv(peer, data, bytes, tag);
  }
  Status doSendRecv(int to,
                    const void* data,
                    size_t bytes,
                    int from,
                    ByteVector* received,
                    uint32_t tag) override {
    calls_.emplace_back("sendRecv");
    return inner_.sendRecv(to, data, bytes, from, received, tag);
  }
  Status doAlltoallv(const std::vector<ConstBytes>& sends,
                     std::vector<ByteVector>* received) override {
    calls_.emplace_back("alltoallv");
    return inner_.alltoallv(sends, received);
  }
  Status doAllgatherv(const void* data, size_t bytes, std::vector<ByteVector>* gathered) override {
    calls_.emplace_back("allgatherv");
    return inner_.allgatherv(data, bytes, gathered);
  }
  Status doAllreduce(void* data, size_t count, DataType dtype, ReduceOp op) override {
    calls_.emplace_back("allreduce");
    return inner_.allreduce(data, count, dtype, op);
  }
  Status doReducescatter(void* data,
                         const std::vector<size_t>& counts,
                         DataType dtype,
                         ReduceOp op) override {
    calls_.emplace_back("reducescatter");
    return inner_.reducescatter(data, counts, dtype, op);
  }
  Status doBroadcast(void* data, size_t bytes, int root) override {
    calls_.emplace_back("broadcast");
    return inner_.broadcast(data, bytes, root);
  }
  Status doBarrier() override {
    calls_.emplace_back("barrier");
    return inner_.barrier();
  }
  Result<std::unique_ptr<Transport>> doSubset(const std::vector<int32_t>&, int32_t) override {
    return ZEN_ERROR(StatusCode::kUnimplemented, "no subsets of a recording transport");
  }

 private:
  Transport& inner_;
  std::vector<std::string> calls_;
};

using Calls = std::vector<std::string>;

// Rank r's rows, the same on every rank; rank 1 has none (it sends its summary alone).
std::vector<SparseTensor> inputs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SparseTensor> ranks;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<int64_t> idx;
    if (r != 1) idx = ref::uniformIndices(rng, kNumRows, 10 + 7 * r);
    ranks.push_back(ref::makeRank(rng, std::move(idx), kNumRows, 2, DataType::kFloat32));
  }
  return ranks;
}

// The collectives one call enters on n = 4 ranks, with rows (and with none anywhere).
const std::map<Scheme, std::pair<Calls, Calls>>& expectedRounds() {
  static const std::map<Scheme, std::pair<Calls, Calls>> rounds = {
      {Scheme::kZen, {{"alltoallv", "allgatherv"}, {"alltoallv"}}},
      {Scheme::kAgSparse, {{"alltoallv"}, {"alltoallv"}}},
      {Scheme::kHc, {{"alltoallv", "sendRecv", "sendRecv"}, {"alltoallv"}}},
      {Scheme::kBlocks, {{"alltoallv", "allgatherv"}, {"alltoallv"}}},
      {Scheme::kDense, {{"alltoallv", "allreduce"}, {"alltoallv"}}},
  };
  return rounds;
}

class RoundsTest : public ::testing::TestWithParam<Backend> {
 protected:
  void run(const std::function<void(RecordingTransport&)>& fn) {
    RankOptions options;
    options.timeoutSeconds = 20.0;
    runRanks(TransportParam{GetParam(), kRanks}, options, [&](Transport& t) {
      RecordingTransport recording(t);
      fn(recording);
    });
  }
};

TEST_P(RoundsTest, CollectivesPerCall) {
  const std::vector<SparseTensor> in = inputs(3);
  const ref::DenseSum sum = ref::denseSum(ref::views(in));
  SparseTensor empty;
  empty.numRows = kNumRows;
  empty.rowSize = 2;
  run([&](RecordingTransport& t) {
    for (const auto& [scheme, rounds] : expectedRounds()) {
      t.clear();
      SparseAllreduceResult result;
      Status s = sparseAllreduce(optionsFor(t, in[t.rank()], scheme), &result);
      ASSERT_TRUE(s.isOk()) << schemeName(scheme) << ": " << s.toString();
      EXPECT_EQ(t.calls(), rounds.first) << schemeName(scheme);
      EXPECT_EQ(result.stats.totalNnz, 10 + 24 + 31);
      if (scheme != Scheme::kDense) {
        EXPECT_TRUE(ref::sparseMatches(result.sparse, sum)) << schemeName(scheme);
      }

      t.clear();
      SparseAllreduceOptions o = optionsFor(t, empty, scheme);
      o.denseOutput = true;
      s = sparseAllreduce(o, &result);
      ASSERT_TRUE(s.isOk()) << schemeName(scheme) << ": " << s.toString();
      EXPECT_EQ(t.calls(), rounds.second) << schemeName(scheme) << ", no rows anywhere";
      EXPECT_EQ(result.dense, std::vector<std::byte>(kNumRows * 2 * 4, std::byte{0}));
      EXPECT_EQ(result.sparse.nnz(), 0);
    }
  });
}

// One rank's call differs (how: `spoil`); every rank must return the same kInvalidArgument
// containing `expected`, after the first exchange only, without waiting for a timeout; the
// next good call works.
void expectSameErrorEverywhere(Backend backend,
                               Scheme scheme,
                               const std::function<void(int rank, SparseAllreduceOptions*)>& spoil,
                               const std::string& expected) {
  std::mutex mu;
  std::vector<std::string> messages(kRanks);
  RankOptions options;
  options.timeoutSeconds = 20.0;
  runRanks(TransportParam{backend, kRanks}, options, [&](Transport& inner) {
    RecordingTransport t(inner);
    const std::vector<SparseTensor> in = inputs(5);
    SparseAllreduceOptions o = optionsFor(t, in[t.rank()], scheme);
    spoil(t.rank(), &o);
    SparseAllreduceResult result;
    double seconds = 0;
    const Status s = timedSparseAllreduce(o, &result, &seconds);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_EQ(t.calls(), Calls{"alltoallv"}) << "rank " << t.rank() << " went on after the verdict";
    EXPECT_LT(seconds, 10.0) << "the error should not wait for the 20 s transport timeout";
    {
      std::lock_guard<std::mutex> lock(mu);
      messages[t.rank()] = s.message();
    }
    const Status again = sparseAllreduce(optionsFor(t, in[t.rank()], scheme), &result);
    ASSERT_TRUE(again.isOk()) << again.toString();
    EXPECT_TRUE(ref::sparseMatches(result.sparse, ref::denseSum(ref::views(in))));
  });
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(messages[r], messages[0]) << "rank " << r;
}

TEST_P(RoundsTest, FoldedSummaryRefusesAnotherRowSizeBeforeReadingRows) {
  for (Scheme scheme : {Scheme::kZen, Scheme::kAgSparse, Scheme::kBlocks}) {
    SCOPED_TRACE(schemeName(scheme));
    // Rank 2's rows are 3 wide: read as 2-wide rows they would parse, wrongly.
    std::vector<SparseTensor> odd = inputs(5);
    std::mt19937_64 rng(1);
    odd[2] = ref::makeRank(rng, odd[2].indices, kNumRows, 3, DataType::kFloat32);
    expectSameErrorEverywhere(
        GetParam(), scheme,
        [&](int rank, SparseAllreduceOptions* o) {
          if (rank == 2) o->input = odd[2].view();
        },
        "rank 2 passed 100 rows x 3, rank 0 100 rows x 2");
  }
}

TEST_P(RoundsTest, FoldedSummaryRefusesAnotherDtype) {
  for (Scheme scheme : {Scheme::kZen, Scheme::kAgSparse, Scheme::kBlocks}) {
    SCOPED_TRACE(schemeName(scheme));
    std::vector<SparseTensor> odd = inputs(5);
    // int32 rows of the same size in bytes: they would decode, as garbage floats.
    std::mt19937_64 rng(2);
    odd[3] = ref::makeRank(rng, odd[3].indices, kNumRows, 2, DataType::kInt32);
    expectSameErrorEverywhere(
        GetParam(), scheme,
        [&](int rank, SparseAllreduceOptions* o) {
          if (rank == 3) o->input = odd[3].view();
        },
        "rank 3 passed dtype int32, rank 0 float32");
  }
}

TEST_P(RoundsTest, FoldedSummaryCarriesABadIndex) {
  for (Scheme scheme : {Scheme::kZen, Scheme::kAgSparse, Scheme::kBlocks}) {
    SCOPED_TRACE(schemeName(scheme));
    std::vector<SparseTensor> bad = inputs(5);
    bad[3].indices.push_back(kNumRows + 5);
    bad[3].values.resize(bad[3].values.size() + bad[3].rowBytes());
    expectSameErrorEverywhere(
        GetParam(), scheme,
        [&](int rank, SparseAllreduceOptions* o) {
          if (rank == 3) o->input = bad[3].view();
        },
        "rank 3: index 105");
  }
}

// Ranks that ask for different schemes all enter the same first collective, so the verdict
// names the odd one instead of two collectives waiting for each other.
TEST_P(RoundsTest, AnotherSchemeOnOneRankIsTheSameErrorEverywhere) {
  const std::pair<Scheme, Scheme> pairs[] = {{Scheme::kZen, Scheme::kAgSparse},
                                             {Scheme::kAgSparse, Scheme::kZen},
                                             {Scheme::kZen, Scheme::kHc},
                                             {Scheme::kAgSparse, Scheme::kDense},
                                             {Scheme::kBlocks, Scheme::kZen}};
  for (const auto& [common, odd] : pairs) {
    SCOPED_TRACE(std::string(schemeName(common)) + " vs " + schemeName(odd));
    const Scheme oddScheme = odd;
    std::mutex mu;
    std::vector<std::string> messages(kRanks);
    RankOptions options;
    options.timeoutSeconds = 20.0;
    runRanks(TransportParam{GetParam(), kRanks}, options, [&](Transport& t) {
      const std::vector<SparseTensor> in = inputs(5);
      SparseAllreduceResult result;
      const auto start = std::chrono::steady_clock::now();
      const Status s =
          sparseAllreduce(optionsFor(t, in[t.rank()], t.rank() == 1 ? oddScheme : common), &result);
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                10.0);  // half the 20 s timeout, generous for a loaded machine
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_NE(s.message().find(std::string("rank 1 asked for scheme ") + schemeName(oddScheme)),
                std::string::npos)
          << s.message();
      std::lock_guard<std::mutex> lock(mu);
      messages[t.rank()] = s.message();
    });
    for (int r = 1; r < kRanks; ++r) EXPECT_EQ(messages[r], messages[0]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Local,
                         RoundsTest,
                         ::testing::Values(Backend::kInProcess, Backend::kTcp),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(backendName(info.param));
                         });

}  // namespace
}  // namespace zen::ops::testing
