// The sparse allreduce contract on every backend: results equal the dense reference (exact
// for Sum of integer-valued data, within one rounding for Average), a bad input on one rank is
// the same clear error on every rank, and nothing waits longer than the transport timeout.
// Every rank builds every rank's input from the same seed, so the reference is local.
#include "test/ops/sparse_allreduce_test.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "core/thread_pool.h"
#include "ops/sparse_allreduce.h"
#include "test/core/reference.h"

namespace zen::ops::testing {

void PrintTo(const SparseParam& param, std::ostream* out) {
  PrintTo(param.transport, out);
  *out << ", scheme " << schemeName(param.scheme);
}

std::string sparseParamName(const ::testing::TestParamInfo<SparseParam>& info) {
  const TransportParam& t = info.param.transport;
  std::string name = backendName(t.backend);
  if (t.ranks > 0) name += "_n" + std::to_string(t.ranks);
  return name + "_" + schemeName(info.param.scheme);
}

namespace {

namespace ref = ::zen::reference;

enum class Pattern { kSomeEmpty, kOne, kRandom, kAllRows };

struct Case {
  DataType dtype;
  int64_t rowSize;
  ReduceOp op;
  bool denseOutput;
  Pattern pattern;
  bool zipf;
  uint64_t seed;
  int64_t rows = 0;  // 0: the default below

  // Odd row counts that n does not divide, so IndexMap tails and empty parts occur.
  int64_t numRows() const { return rows > 0 ? rows : rowSize == 1 ? 131 : 61; }
};

std::vector<Case> cases(Coverage coverage) {
  std::vector<Case> out;
  uint64_t seed = 1;
  int i = 0;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                         DataType::kFloat64, DataType::kInt64}) {
    for (int64_t rowSize : {1, 3}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (bool dense : {false, true}) {
          for (Pattern pattern :
               {Pattern::kSomeEmpty, Pattern::kOne, Pattern::kRandom, Pattern::kAllRows}) {
            for (bool zipf : {false, true}) {
              if (coverage == Coverage::kFull || i % 7 == 3) {
                out.push_back(Case{dtype, rowSize, op, dense, pattern, zipf, seed});
              }
              ++i;
              ++seed;
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<int64_t> someIndices(std::mt19937_64& rng, int64_t numRows, int64_t unique, bool zipf) {
  return zipf ? ref::zipfIndices(rng, numRows, unique) : ref::uniformIndices(rng, numRows, unique);
}

// Rank r's tensor for every r, the same on every rank.
std::vector<SparseTensor> makeInputs(const Case& c, int n) {
  std::mt19937_64 rng(c.seed * 7919 + static_cast<uint64_t>(n));
  const int64_t numRows = c.numRows();
  std::vector<SparseTensor> ranks;
  for (int r = 0; r < n; ++r) {
    std::vector<int64_t> idx;
    switch (c.pattern) {
      case Pattern::kSomeEmpty:
        if (r % 2 == 1) idx = someIndices(rng, numRows, numRows / 4, c.zipf);
        break;
      case Pattern::kOne:
        idx = someIndices(rng, numRows, 1, c.zipf);
        idx.resize(1);
        break;
      case Pattern::kRandom: {
        const auto unique = static_cast<int64_t>(1 + rng() % static_cast<uint64_t>(numRows / 3));
        idx = someIndices(rng, numRows, unique, c.zipf);
        ref::addDuplicates(rng, &idx, unique / 5);
        break;
      }
      case Pattern::kAllRows: {
        idx.resize(static_cast<size_t>(numRows));
        std::iota(idx.begin(), idx.end(), 0);
        std::shuffle(idx.begin(), idx.end(), rng);
        const std::vector<int64_t> extra = someIndices(rng, numRows, numRows / 10, c.zipf);
        idx.insert(idx.end(), extra.begin(), extra.end());
        break;
      }
    }
    ranks.push_back(ref::makeRank(rng, std::move(idx), numRows, c.rowSize, c.dtype));
  }
  return ranks;
}

// The element the reference expects, as the dense scheme's sparse output would keep it.
bool expectedNonzero(const ref::DenseSum& sum, size_t k, int divisor) {
  return ref::isInteger(sum.dtype) ? sum.i[k] / divisor != 0 : sum.f[k] != 0.0;
}

// The dense scheme's sparse output: exactly the rows with a non-zero element.
::testing::AssertionResult nonzeroRowsMatch(const SparseTensor& out,
                                            const ref::DenseSum& sum,
                                            int divisor,
                                            double relTol) {
  std::vector<int64_t> want;
  for (int64_t r = 0; r < sum.numRows; ++r) {
    bool nonzero = false;
    for (int64_t e = 0; e < sum.rowSize; ++e) {
      nonzero |= expectedNonzero(sum, static_cast<size_t>(r * sum.rowSize + e), divisor);
    }
    if (nonzero) want.push_back(r);
  }
  if (out.indices != want) {
    return ::testing::AssertionFailure()
           << "output has " << out.nnz() << " rows, " << want.size() << " are non-zero";
  }
  for (int64_t k = 0; k < out.nnz(); ++k) {
    for (int64_t e = 0; e < sum.rowSize; ++e) {
      auto m = ref::elementMatches(sum, static_cast<size_t>(out.indices[k] * sum.rowSize + e),
                                   out.values.data(), static_cast<size_t>(k * sum.rowSize + e),
                                   divisor, relTol);
      if (!m) return m;
    }
  }
  return ::testing::AssertionSuccess();
}

std::string describe(const Case& c, int n) {
  static const char* const kPatterns[] = {"some-empty", "one", "random", "all-rows"};
  return fmt::format("n={} {} x{} {} {} output, {} {}, seed {}", n, dataTypeName(c.dtype),
                     c.rowSize, c.op == ReduceOp::kSum ? "sum" : "average",
                     c.denseOutput ? "dense" : "sparse", kPatterns[static_cast<int>(c.pattern)],
                     c.zipf ? "zipf" : "uniform", c.seed);
}

// A dense output written in place into tensors of the caller's (denseOutputTensors), as the
// runtime's buckets are, concatenated.
using OutputTensors = std::vector<std::vector<std::byte>>;

std::vector<std::byte> concatenated(const OutputTensors& tensors) {
  std::vector<std::byte> all;
  for (const auto& t : tensors) all.insert(all.end(), t.begin(), t.end());
  return all;
}

// Half the dense cases write into tensors: one (a bucket of one tensor), or three, the second
// empty (a fused bucket), by the seed. They start poisoned: every element must be written.
void maybeIntoTensors(const Case& c, SparseAllreduceOptions* o, OutputTensors* tensors) {
  tensors->clear();
  if (!c.denseOutput || c.seed % 4 >= 2) return;
  const int64_t rows = c.numRows();
  const std::vector<int64_t> pieces = c.seed % 4 == 0
                                          ? std::vector<int64_t>{rows}
                                          : std::vector<int64_t>{rows / 3, 0, rows - rows / 3};
  for (int64_t piece : pieces) {
    tensors->emplace_back(static_cast<size_t>(piece * c.rowSize) * dataTypeSize(c.dtype),
                          std::byte{0xa5});
    o->denseOutputTensors.push_back(
        DenseView{tensors->back().data(), c.dtype, TensorShape({piece, c.rowSize}), Device::cpu()});
  }
}

// tensors: the caller's dense output (maybeIntoTensors), empty when the result holds it.
void checkResult(const Case& c,
                 Scheme scheme,
                 int n,
                 const std::vector<SparseTensor>& inputs,
                 const Status& status,
                 const SparseAllreduceResult& result,
                 const OutputTensors& tensors = {}) {
  SCOPED_TRACE(describe(c, n));
  ASSERT_TRUE(status.isOk()) << status.toString();
  const ref::DenseSum sum = ref::denseSum(ref::views(inputs));
  const int divisor = c.op == ReduceOp::kAverage ? n : 1;
  const double tol = c.op == ReduceOp::kAverage ? ref::averageTolerance(c.dtype) : 0.0;
  if (c.denseOutput) {
    const std::vector<std::byte> dense = tensors.empty() ? result.dense : concatenated(tensors);
    if (!tensors.empty()) {
      EXPECT_TRUE(result.dense.empty());
    }
    ASSERT_EQ(dense.size(), static_cast<size_t>(sum.numRows) * static_cast<size_t>(sum.rowSize) *
                                dataTypeSize(c.dtype));
    EXPECT_TRUE(ref::denseMatches(dense.data(), sum, divisor, tol));
  } else if (scheme == Scheme::kDense) {
    EXPECT_TRUE(nonzeroRowsMatch(result.sparse, sum, divisor, tol));
  } else {
    EXPECT_TRUE(ref::sparseMatches(result.sparse, sum, divisor, tol));
  }
  EXPECT_EQ(result.stats.scheme, scheme);
  EXPECT_GE(result.stats.seconds, 0.0);
  EXPECT_FALSE(result.stats.phases.empty());
  if (n == 1) {
    EXPECT_EQ(result.stats.bytesSent, 0u);
    EXPECT_EQ(result.stats.bytesReceived, 0u);
  } else {
    // At least every peer's call summary.
    EXPECT_GE(result.stats.bytesSent, static_cast<uint64_t>(n - 1) * 56);
    EXPECT_GE(result.stats.bytesReceived, static_cast<uint64_t>(n - 1) * 56);
  }
}

TEST_P(SparseAllreduceTest, MatchesDenseReference) {
  const std::vector<Case> all = cases(GetParam().coverage);
  run([&](Transport& t) {
    const int n = t.size();
    for (const Case& c : all) {
      const std::vector<SparseTensor> inputs = makeInputs(c, n);
      SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
      o.op = c.op;
      o.denseOutput = c.denseOutput;
      OutputTensors tensors;
      maybeIntoTensors(c, &o, &tensors);
      SparseAllreduceResult result;
      const Status s = sparseAllreduce(o, &result);
      checkResult(c, scheme(), n, inputs, s, result, tensors);
    }
  });
}

// One workspace (and a thread pool) across calls whose shape, dtype and density change.
TEST_P(SparseAllreduceTest, ReusesWorkspaceAcrossChangingCalls) {
  std::vector<Case> sequence;
  uint64_t seed = 1000;
  for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat64}) {
    for (Pattern pattern : {Pattern::kRandom, Pattern::kAllRows, Pattern::kOne}) {
      sequence.push_back(Case{dtype, seed % 2 == 0 ? 1 : 3, ReduceOp::kSum, seed % 3 == 0, pattern,
                              seed % 2 == 1, seed});
      ++seed;
    }
  }
  run([&](Transport& t) {
    SparseAllreduceWorkspace workspace;
    ThreadPool pool(2);
    for (const Case& c : sequence) {
      const std::vector<SparseTensor> inputs = makeInputs(c, t.size());
      SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
      o.denseOutput = c.denseOutput;
      o.workspace = &workspace;
      o.pool = c.seed % 2 == 0 ? &pool : nullptr;
      OutputTensors tensors;
      maybeIntoTensors(c, &o, &tensors);
      SparseAllreduceResult result;
      const Status s = sparseAllreduce(o, &result);
      checkResult(c, scheme(), t.size(), inputs, s, result, tensors);
    }
  });
}

TEST_P(SparseAllreduceTest, AllEmptyShortCircuits) {
  run([&](Transport& t) {
    const int n = t.size();
    for (int output : {0, 1, 2}) {  // sparse, dense, dense into a tensor
      SparseTensor empty;
      empty.numRows = 50;
      empty.rowSize = 2;
      SparseAllreduceOptions o = optionsFor(t, empty, scheme());
      o.denseOutput = output > 0;
      std::vector<std::byte> tensor(output == 2 ? 50 * 2 * 4 : 0, std::byte{0xa5});
      if (output == 2) {
        o.denseOutputTensors = {
            DenseView{tensor.data(), DataType::kFloat32, TensorShape({50, 2}), Device::cpu()}};
      }
      SparseAllreduceResult result;
      const Status s = sparseAllreduce(o, &result);
      ASSERT_TRUE(s.isOk()) << s.toString();
      EXPECT_EQ(result.sparse.nnz(), 0);
      EXPECT_EQ(result.sparse.numRows, 50);
      if (output == 1) {
        EXPECT_EQ(result.dense, std::vector<std::byte>(50 * 2 * 4, std::byte{0}));
      }
      if (output == 2) {
        EXPECT_EQ(tensor, std::vector<std::byte>(50 * 2 * 4, std::byte{0}));
        EXPECT_TRUE(result.dense.empty());
      }
      // Only the call summaries travel.
      EXPECT_EQ(result.stats.bytesSent, static_cast<uint64_t>(n - 1) * 56);
      EXPECT_EQ(result.stats.bytesReceived, static_cast<uint64_t>(n - 1) * 56);
    }
  });
}

// Many rows, rows of 4, 20, 32 and 132 bytes (20 and 132 copied at their run-time size), a few
// or many per rank, with and without a thread pool: the zen scheme's sparse decode places a
// few by radix sort, many by counting (DistinctKeyRanks; the most in pieces on the pool's
// threads), and the dense decode, all against the reference.
TEST_P(SparseAllreduceTest, WideTensorsWithFewAndManyRows) {
  run([&](Transport& t) {
    const int n = t.size();
    uint64_t seed = 500;
    ThreadPool pool(3);
    for (int64_t rowSize : {1, 5, 8, 33}) {
      for (int64_t perRank : {3, 1'500, 12'000}) {
        for (bool dense : {false, true}) {
          Case c{DataType::kFloat32, rowSize, ReduceOp::kSum, dense,
                 Pattern::kRandom,   false,   seed++};
          c.rows = 50'021;
          std::mt19937_64 rng(c.seed * 31 + static_cast<uint64_t>(n));
          std::vector<SparseTensor> inputs;
          for (int r = 0; r < n; ++r) {
            inputs.push_back(ref::makeRank(rng, ref::uniformIndices(rng, c.numRows(), perRank),
                                           c.numRows(), rowSize, c.dtype));
          }
          SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
          o.denseOutput = dense;
          o.pool = perRank > 1'500 ? &pool : nullptr;
          OutputTensors tensors;  // the largest (6.6 MB) zeroed in parts on the pool
          maybeIntoTensors(c, &o, &tensors);
          SparseAllreduceResult result;
          const Status s = sparseAllreduce(o, &result);
          checkResult(c, scheme(), n, inputs, s, result, tensors);
        }
      }
    }
  });
}

// An index out of range on the last rank: every rank returns the same kInvalidArgument naming
// that rank and the index, at once (no rank waits for a timeout), and the transport is still
// usable afterwards.
TEST_P(SparseAllreduceTest, BadIndexOnOneRankFailsEveryRank) {
  const Case good{DataType::kFloat32, 3, ReduceOp::kSum, false, Pattern::kRandom, false, 77};
  run([&](Transport& t) {
    const int n = t.size();
    const int bad = n - 1;
    for (int64_t badIndex : {good.numRows() + 5, int64_t{-3}}) {
      std::vector<SparseTensor> inputs = makeInputs(good, n);
      inputs[bad].indices.push_back(badIndex);
      inputs[bad].values.resize(inputs[bad].values.size() + inputs[bad].rowBytes(), std::byte{0});
      SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
      SparseAllreduceResult result;
      double seconds = 0;
      const Status s = timedSparseAllreduce(o, &result, &seconds);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_NE(
          s.message().find("rank " + std::to_string(bad) + ": index " + std::to_string(badIndex)),
          std::string::npos)
          << s.message();
      EXPECT_LT(seconds, 10.0) << "the error should not wait for the 20 s transport timeout";
    }
    const std::vector<SparseTensor> inputs = makeInputs(good, n);
    SparseAllreduceResult result;
    const Status s = sparseAllreduce(optionsFor(t, inputs[t.rank()], scheme()), &result);
    checkResult(good, scheme(), n, inputs, s, result);
  });
}

// Dense output tensors that cannot hold the result (or that come without denseOutput) on one
// rank: the same error on every rank, naming it; the transport stays usable.
TEST_P(SparseAllreduceTest, BadDenseOutputTensorsFailEveryRank) {
  const Case good{DataType::kFloat32, 3, ReduceOp::kSum, true, Pattern::kRandom, false, 4};
  run([&](Transport& t) {
    const int n = t.size();
    const int bad = n - 1;
    const std::vector<SparseTensor> inputs = makeInputs(good, n);
    const int64_t rows = good.numRows();
    std::vector<std::byte> memory(static_cast<size_t>(rows * 3 * 4));
    auto view = [&](int64_t elements, DataType dtype, Device device) {
      return DenseView{memory.data(), dtype, TensorShape({elements}), device};
    };
    struct Bad {
      std::vector<DenseView> tensors;
      bool denseOutput;
      const char* message;
    };
    const Bad bads[] = {
        {{view(rows * 3 - 3, DataType::kFloat32, Device::cpu())}, true, "hold 180 elements, not"},
        {{view(rows * 3, DataType::kFloat32, Device::cpu()),
          view(3, DataType::kFloat32, Device::cpu())},
         true,
         "hold 186 elements, not"},
        {{view(4, DataType::kFloat32, Device::cpu())}, true, "tensor 0 (4 float32) is no whole"},
        {{view(rows * 3, DataType::kInt32, Device::cpu())}, true, "is no whole number of rows"},
        {{view(rows * 3, DataType::kFloat32, Device::cuda(0))}, true, "needs host memory"},
        {{view(rows * 3, DataType::kFloat32, Device::cpu())}, false, "the output is sparse"},
        {{DenseView{nullptr, DataType::kFloat32, TensorShape({rows * 3}), Device::cpu()}},
         true,
         "tensor 0 has no data"},
    };
    for (const Bad& b : bads) {
      SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
      o.denseOutput = true;
      if (t.rank() == bad) {
        o.denseOutputTensors = b.tensors;
        o.denseOutput = b.denseOutput;
      }
      SparseAllreduceResult result;
      double seconds = 0;
      const Status s = timedSparseAllreduce(o, &result, &seconds);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_NE(s.message().find("rank " + std::to_string(bad)), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(b.message), std::string::npos) << s.message();
      EXPECT_LT(seconds, 10.0) << "the error should not wait for the 20 s transport timeout";
    }
    SparseAllreduceOptions o = optionsFor(t, inputs[t.rank()], scheme());
    o.denseOutput = true;
    OutputTensors out;
    maybeIntoTensors(good, &o, &out);
    ASSERT_EQ(out.size(), 1u);
    SparseAllreduceResult result;
    const Status s = sparseAllreduce(o, &result);
    checkResult(good, scheme(), n, inputs, s, result, out);
  });
}

// Ranks that disagree on the call: the same error on every rank, naming the odd one.
TEST_P(SparseAllreduceTest, DisagreeingRanksFailEveryRank) {
  const Case good{DataType::kFloat32, 1, ReduceOp::kSum, false, Pattern::kRandom, true, 91};
  run([&](Transport& t) {
    const int n = t.size();
    if (n == 1) return;
    const std::vector<SparseTensor> inputs = makeInputs(good, n);
    SparseTensor odd = inputs[1];
    odd.numRows += 1;
    SparseAllreduceOptions o = optionsFor(t, t.rank() == 1 ? odd : inputs[t.rank()], scheme());
    SparseAllreduceResult result;
    Status s = sparseAllreduce(o, &result);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("rank 1 passed 132 rows"), std::string::npos) << s.message();

    o = optionsFor(t, inputs[t.rank()], scheme());
    if (t.rank() == 1) o.op = ReduceOp::kAverage;
    s = sparseAllreduce(o, &result);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("rank 1 asked for average"), std::string::npos) << s.message();
  });
}

}  // namespace
}  // namespace zen::ops::testing
