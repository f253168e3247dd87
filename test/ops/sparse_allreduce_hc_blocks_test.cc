// The HC (SparCML) and blocks (OmniReduce-style) sparse allreduce schemes on real transports:
// results against a dense reference over dtypes, row sizes, ops, output forms and input
// patterns; HC's dense switch and its bytes in closed form; the blocks scheme's load
// imbalance under skew. Inputs are integer-valued (test/common/sparse_inputs.h), so sums are
// exact in every dtype and compared bit for bit; averages within the dtype's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/call_summary.h"
#include "ops/hc_wire.h"
#include "ops/sparse_allreduce.h"
#include "test/common/sparse_inputs.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

using zen::testing::RowMap;
using zen::testing::Skew;

struct SchemeParam {
  TransportParam transport;
  Scheme scheme;
};

void PrintTo(const SchemeParam& p, std::ostream* out) {
  PrintTo(p.transport, out);
  *out << ", scheme " << schemeName(p.scheme);
}

std::string schemeParamName(const ::testing::TestParamInfo<SchemeParam>& info) {
  const TransportParam& t = info.param.transport;
  std::string name = backendName(t.backend);
  if (t.ranks > 0) name += "_n" + std::to_string(t.ranks);
  return name + "_" + schemeName(info.param.scheme);
}

enum class Pattern { kAllEmpty, kSomeEmpty, kOne, kUniform, kZipf, kAll };
constexpr Pattern kPatterns[] = {Pattern::kAllEmpty, Pattern::kSomeEmpty, Pattern::kOne,
                                 Pattern::kUniform,  Pattern::kZipf,      Pattern::kAll};
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                               DataType::kFloat64};

// Rank r's input for one case; every rank builds all of them to compute the reference.
// Random patterns repeat some indices (uncoalesced gradients) and reach ~5% density.
SparseTensor makeInput(
    Pattern pattern, int rank, int64_t numRows, int64_t rowSize, DataType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(rank));
  std::vector<int64_t> indices;
  switch (pattern) {
    case Pattern::kAllEmpty:
      break;
    case Pattern::kSomeEmpty:
      if (rank % 2 == 0) indices = zen::testing::distinctIndices(numRows, 40, Skew::kUniform, rng);
      break;
    case Pattern::kOne:
      indices = {static_cast<int64_t>(rng() % static_cast<uint64_t>(numRows))};
      break;
    case Pattern::kUniform:
    case Pattern::kZipf: {
      const Skew skew = pattern == Pattern::kZipf ? Skew::kZipf : Skew::kUniform;
      indices = zen::testing::distinctIndices(numRows, numRows / 20, skew, rng);
      for (size_t i = 0; i < indices.size(); i += 7) indices.push_back(indices[i]);
      break;
    }
    case Pattern::kAll:
      indices = zen::testing::distinctIndices(numRows, numRows, Skew::kUniform, rng);
      break;
  }
  return zen::testing::makeSparse(std::move(indices), numRows, rowSize, dtype, rng);
}

double tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return 1e-3;
    case DataType::kBFloat16:
      return 8e-3;
    case DataType::kFloat32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

double loadValue(const std::byte* data, DataType dtype, size_t i) {
  return dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(toAccumulator<AccumulatorT<T>>(reinterpret_cast<const T*>(data)[i]));
  });
}

// Sum: bit-exact (integer-valued data). Average: within the dtype's rounding.
void expectClose(double got, double want, DataType dtype, bool average, const std::string& where) {
  if (!average) {
    EXPECT_EQ(got, want) << where;
  } else {
    EXPECT_NEAR(got, want, tolerance(dtype) * std::max(1.0, std::abs(want))) << where;
  }
}

// Checks a result against the reference: the union of the sent rows (sparse output, in
// ascending order) or every row of the dense output.
void expectMatches(const SparseAllreduceResult& result,
                   const RowMap& sum,
                   int n,
                   int64_t numRows,
                   int64_t rowSize,
                   DataType dtype,
                   bool average,
                   bool denseOutput,
                   const std::string& where) {
  const double divisor = average ? n : 1;
  EXPECT_EQ(result.stats.outputNnz, static_cast<int64_t>(sum.size())) << where;
  if (denseOutput) {
    ASSERT_EQ(result.dense.size(), static_cast<size_t>(numRows * rowSize) * dataTypeSize(dtype))
        << where;
    for (int64_t r = 0; r < numRows; ++r) {
      auto it = sum.find(r);
      for (int64_t e = 0; e < rowSize; ++e) {
        const double want = it == sum.end() ? 0.0 : it->second[e] / divisor;
        const double got = loadValue(result.dense.data(), dtype, r * rowSize + e);
        expectClose(got, want, dtype, average, where + " row " + std::to_string(r));
        if (::testing::Test::HasFailure()) return;
      }
    }
    return;
  }
  const SparseTensor& s = result.sparse;
  EXPECT_EQ(s.numRows, numRows) << where;
  EXPECT_EQ(s.rowSize, rowSize) << where;
  EXPECT_EQ(s.dtype, dtype) << where;
  ASSERT_EQ(s.indices.size(), sum.size()) << where;
  ASSERT_EQ(s.values.size(), sum.size() * s.rowBytes()) << where;
  size_t k = 0;
  for (const auto& [index, row] : sum) {
    ASSERT_EQ(s.indices[k], index) << where << " position " << k;
    for (int64_t e = 0; e < rowSize; ++e) {
      expectClose(loadValue(s.values.data(), dtype, k * rowSize + e), row[e] / divisor, dtype,
                  average, where + " index " + std::to_string(index));
    }
    if (::testing::Test::HasFailure()) return;
    ++k;
  }
}

// The scheme function alone (no dispatcher: hc without the call summary round; blocks
// carries the summary in its push), with the bytes this rank sent during it: what the
// closed-form byte checks compare against.
Status runSchemeOnly(const SparseAllreduceOptions& options, SparseAllreduceResult* out) {
  Transport& t = *options.transport;
  const uint64_t sent = t.counters().totalSent();
  *out = SparseAllreduceResult{};
  Status status =
      options.scheme == Scheme::kHc
          ? sparseAllreduceHc(options, out)
          : sparseAllreduceBlocks(options, describeCall(options, t.rank(), Status::ok()), out);
  out->stats.scheme = options.scheme;
  out->stats.bytesSent = t.counters().totalSent() - sent;
  return status;
}

class HcBlocksTest : public ::testing::TestWithParam<SchemeParam> {
 protected:
  void run(const std::function<void(Transport&)>& fn) {
    runRanks(GetParam().transport, RankOptions{}, fn);
  }
  Scheme scheme() const { return GetParam().scheme; }
};

// Every pattern x dtype x row size, with op and output form alternating between cases; odd
// |G| so the last block is partial and, at n = 8, some owners have no blocks.
TEST_P(HcBlocksTest, MatchesDenseReference) {
  constexpr int64_t kNumRows = 1237;
  run([&](Transport& t) {
    const int n = t.size();
    uint64_t seed = 1;
    for (Pattern pattern : kPatterns) {
      for (DataType dtype : kTypes) {
        for (int64_t rowSize : {int64_t{1}, int64_t{3}}) {
          ++seed;
          const bool average = seed % 2 == 0;
          const bool denseOutput = seed % 3 == 0;
          RowMap sum;
          SparseTensor mine;
          for (int r = 0; r < n; ++r) {
            SparseTensor in = makeInput(pattern, r, kNumRows, rowSize, dtype, seed);
            const SparseView v = in.view();
            for (int64_t i = 0; i < v.nnz; ++i) {
              zen::testing::addRow(sum, v.indices[i], v.row(i), rowSize, dtype);
            }
            if (r == t.rank()) mine = std::move(in);
          }
          SparseAllreduceOptions options;
          options.transport = &t;
          options.input = mine.view();
          options.op = average ? ReduceOp::kAverage : ReduceOp::kSum;
          options.scheme = scheme();
          options.denseOutput = denseOutput;
          SparseAllreduceResult result;
          const std::string where =
              fmt::format("rank {} pattern {} {} rowSize {} {} {}", t.rank(),
                          static_cast<int>(pattern), dataTypeName(dtype), rowSize,
                          average ? "average" : "sum", denseOutput ? "dense" : "sparse");
          const Status status = sparseAllreduce(options, &result);
          ASSERT_TRUE(status.isOk()) << where << ": " << status.toString();
          EXPECT_EQ(result.stats.scheme, scheme()) << where;
          expectMatches(result, sum, n, kNumRows, rowSize, dtype, average, denseOutput, where);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  });
}

class HcTest : public HcBlocksTest {};

// One distinct row per rank stays COO all the way; every rank holding every row sends the
// dense form (bitmap + all rows) from its first message on. Bytes match the encoding's
// closed form: 16-byte header, COO rows of 4 + 4 bytes (fp32, rowSize 1), dense
// ceil(|G| / 8) + 4 |G|.
TEST_P(HcTest, SwitchesToDenseAtHighDensityAndCountsBytes) {
  constexpr int64_t kNumRows = 999;
  run([&](Transport& t) {
    const int n = t.size();
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const int logP = static_cast<int>(std::log2(p));
    for (bool full : {false, true}) {
      std::mt19937_64 rng(7);
      std::vector<int64_t> indices;
      if (full) {
        indices = zen::testing::distinctIndices(kNumRows, kNumRows, Skew::kUniform, rng);
      } else {
        indices = {t.rank() * 10};
      }
      SparseTensor in = zen::testing::makeSparse(indices, kNumRows, 1, DataType::kFloat32, rng);
      SparseAllreduceOptions options;
      options.transport = &t;
      options.input = in.view();
      options.scheme = Scheme::kHc;
      SparseAllreduceResult result;
      ASSERT_TRUE(runSchemeOnly(options, &result).isOk());
      int densePhases = 0;
      int sparsePhases = 0;
      for (const auto& [name, seconds] : result.stats.phases) {
        densePhases += name.find("dense") != std::string::npos ? 1 : 0;
        sparsePhases += name.find("sparse") != std::string::npos ? 1 : 0;
      }
      const bool extra = t.rank() >= p;
      const bool folds = !extra && t.rank() < n - p;
      // Messages this rank sends: one per doubling step (none for an extra rank), its own
      // set when it is an extra rank (fold), the result when it has an extra partner.
      const int messages = (extra ? 1 : logP) + (folds ? 1 : 0);
      const uint64_t denseBytes = 16 + (kNumRows + 7) / 8 + 4 * kNumRows;
      if (full) {
        EXPECT_EQ(densePhases, messages) << "rank " << t.rank();
        EXPECT_EQ(sparsePhases, 0);
        EXPECT_EQ(result.stats.bytesSent, messages * denseBytes) << "rank " << t.rank();
      } else {
        EXPECT_EQ(densePhases, 0) << "rank " << t.rank();
        if (n == 1 << logP) {
          // Step s sends the 2^(s-1) distinct rows merged so far.
          uint64_t expected = 0;
          for (int s = 0; s < logP; ++s) expected += 16 + 8 * (uint64_t{1} << s);
          EXPECT_EQ(result.stats.bytesSent, expected) << "rank " << t.rank();
        }
      }
      EXPECT_EQ(result.stats.outputNnz, full ? kNumRows : n);
    }
  });
}

class BlocksSkewTest : public HcBlocksTest {};
class BlocksBytesTest : public HcBlocksTest {};

// OmniReduce's weakness: with |G| split into uniform contiguous ranges, Zipf-skewed indices
// send most blocks to the owner of the low ids, while uniform ones load every owner alike.
TEST_P(BlocksSkewTest, ImbalanceShowsSkew) {
  constexpr int64_t kNumRows = 8 * 64 * 256;  // 64 blocks per owner at n = 8
  run([&](Transport& t) {
    ASSERT_EQ(t.size(), 8);
    for (Skew skew : {Skew::kUniform, Skew::kZipf}) {
      std::mt19937_64 rng(100 + t.rank());
      // Uniform: 10%, every block touched by every rank. Zipf: 0.5%, clustered at low ids.
      const int64_t nnz = skew == Skew::kUniform ? kNumRows / 10 : kNumRows / 200;
      SparseTensor in =
          zen::testing::makeSparse(zen::testing::distinctIndices(kNumRows, nnz, skew, rng),
                                   kNumRows, 1, DataType::kFloat32, rng);
      SparseAllreduceOptions options;
      options.transport = &t;
      options.input = in.view();
      options.scheme = Scheme::kBlocks;
      SparseAllreduceResult result;
      ASSERT_TRUE(runSchemeOnly(options, &result).isOk());
      if (skew == Skew::kUniform) {
        EXPECT_LT(result.stats.imbalance, 1.05) << "rank " << t.rank();
      } else {
        EXPECT_GT(result.stats.imbalance, 2.0) << "rank " << t.rank();
      }
    }
  });
}

// Closed-form bytes at n = 2, fp32, rowSize 1 (R = 256, mask 32 bytes): rank 0 holds one row
// in each rank's range, rank 1 one row in its own range. Push: each rank's 56-byte call
// summary, behind which rank 0 sends one block (4 + 32 + 1024) to rank 1, rank 1 nothing.
// Pull: owner 0 has one aggregated block, owner 1 one (both ranks' rows are in the same
// block), each sent with an 8-byte header.
TEST_P(BlocksBytesTest, MatchClosedForm) {
  run([&](Transport& t) {
    ASSERT_EQ(t.size(), 2);
    constexpr int64_t kNumRows = 512;
    std::mt19937_64 rng(3);
    std::vector<int64_t> indices =
        t.rank() == 0 ? std::vector<int64_t>{5, 300} : std::vector<int64_t>{400};
    SparseTensor in = zen::testing::makeSparse(indices, kNumRows, 1, DataType::kFloat32, rng);
    SparseAllreduceOptions options;
    options.transport = &t;
    options.input = in.view();
    options.scheme = Scheme::kBlocks;
    SparseAllreduceResult result;
    ASSERT_TRUE(runSchemeOnly(options, &result).isOk());
    const uint64_t block = 4 + 32 + 256 * 4;
    const uint64_t push = 56 + (t.rank() == 0 ? block : 0);
    EXPECT_EQ(result.stats.bytesSent, push + 8 + block);
    EXPECT_EQ(result.stats.outputNnz, 3);
    EXPECT_DOUBLE_EQ(result.stats.imbalance, 1.0 * 2 / 3 * 2);  // loads 1 and 2 blocks
  });
}

class CorruptPayloadTest : public HcBlocksTest {};

// Rank 1 answers rank 0's first exchange with a forged message instead of running the scheme
// (blocks: behind a valid call summary): rank 0 must reject it with kIoError before reading
// past it, and the transport stays usable.
TEST_P(CorruptPayloadTest, IsRejected) {
  constexpr int64_t kNumRows = 600;  // blocks of 256 rows: owner 0 holds blocks 0-1
  auto u32 = [](uint32_t v) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &v, 4);
    return b;
  };
  auto header = [](uint8_t format, uint64_t count) {
    std::vector<uint8_t> b(16, 0);
    b[0] = format;
    std::memcpy(b.data() + 8, &count, 8);
    return b;
  };
  auto cat = [](const std::vector<std::vector<uint8_t>>& parts) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const std::vector<uint8_t> row4(4, 0);      // one fp32 value
  const std::vector<uint8_t> mask(32, 0xff);  // R = 256 rows
  const std::vector<uint8_t> block(256 * 4, 0);
  std::vector<std::vector<uint8_t>> forged;
  if (scheme() == Scheme::kHc) {
    forged = {
        {1, 2, 3},                                                // shorter than a header
        header(7, 0),                                             // unknown format
        cat({header(0, 2), u32(5), row4}),                        // fewer rows than count
        cat({header(0, 2), u32(9), u32(3), row4, row4}),          // descending indices
        cat({header(0, 1), u32(kNumRows), row4}),                 // index out of range
        cat({header(1, kNumRows), std::vector<uint8_t>(75, 0)}),  // dense without its rows
        cat({header(1, kNumRows - 1), std::vector<uint8_t>(75 + 4 * (kNumRows - 1), 0)}),
    };
  } else {
    forged = {
        {1, 2},                                           // shorter than a block id
        cat({u32(2), mask, block}),                       // block owned by rank 1
        cat({u32(0), mask}),                              // truncated block
        cat({u32(1), mask, block, u32(0), mask, block}),  // descending ids
    };
  }
  run([&](Transport& t) {
    std::mt19937_64 rng(5);
    SparseTensor in = zen::testing::makeSparse({3, 400}, kNumRows, 1, DataType::kFloat32, rng);
    for (const std::vector<uint8_t>& message : forged) {
      if (t.rank() == 0) {
        SparseAllreduceOptions options;
        options.transport = &t;
        options.input = in.view();
        options.scheme = scheme();
        SparseAllreduceResult result;
        const Status status = runSchemeOnly(options, &result);
        EXPECT_EQ(status.code(), StatusCode::kIoError) << status.toString();
        EXPECT_NE(status.message().find("corrupt"), std::string::npos) << status.toString();
      } else if (scheme() == Scheme::kHc) {  // hc's step: one sendRecv with its partner
        ByteVector received;
        ASSERT_TRUE(t.sendRecv(0, message.data(), message.size(), 0, &received, kHcTag).isOk());
      } else {
        SparseAllreduceOptions options;
        options.input = in.view();
        options.scheme = scheme();
        ByteVector summarized;
        startSummarized(describeCall(options, 1, Status::ok()), &summarized);
        summarized.insert(summarized.end(), message.begin(), message.end());
        std::vector<ConstBytes> sends(2);
        sends[0] = ConstBytes{summarized.data(), summarized.size()};
        std::vector<ByteVector> received;
        ASSERT_TRUE(t.alltoallv(sends, &received).isOk());
      }
      ASSERT_TRUE(t.barrier().isOk());
    }
  });
}

std::vector<SchemeParam> allParams(const std::vector<Scheme>& schemes) {
  std::vector<SchemeParam> params;
  for (Backend backend : {Backend::kInProcess, Backend::kTcp}) {
    for (int n : {1, 2, 3, 4, 5, 7, 8}) {
      for (Scheme scheme : schemes) params.push_back({TransportParam{backend, n}, scheme});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Local,
                         HcBlocksTest,
                         ::testing::ValuesIn(allParams({Scheme::kHc, Scheme::kBlocks})),
                         schemeParamName);
INSTANTIATE_TEST_SUITE_P(Local,
                         HcTest,
                         ::testing::ValuesIn(allParams({Scheme::kHc})),
                         schemeParamName);
INSTANTIATE_TEST_SUITE_P(Local,
                         BlocksSkewTest,
                         ::testing::Values(SchemeParam{{Backend::kInProcess, 8}, Scheme::kBlocks},
                                           SchemeParam{{Backend::kTcp, 8}, Scheme::kBlocks}),
                         schemeParamName);
INSTANTIATE_TEST_SUITE_P(Local,
                         BlocksBytesTest,
                         ::testing::Values(SchemeParam{{Backend::kInProcess, 2}, Scheme::kBlocks},
                                           SchemeParam{{Backend::kTcp, 2}, Scheme::kBlocks}),
                         schemeParamName);

INSTANTIATE_TEST_SUITE_P(Local,
                         CorruptPayloadTest,
                         ::testing::Values(SchemeParam{{Backend::kInProcess, 2}, Scheme::kHc},
                                           SchemeParam{{Backend::kInProcess, 2}, Scheme::kBlocks}),
                         schemeParamName);

}  // namespace
}  // namespace zen::ops::testing
