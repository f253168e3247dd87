// The GPU schemes (zen, hc, agsparse, blocks, dense) end to end over NcclComm, one rank and one
// rank per GPU, against a dense reference computed on the host in closed form: random shapes,
// dtypes, ops, sparse or dense inputs, sparse or dense outputs, fresh seeds, poisoned outputs, one
// workspace reused across every case (shape, dtype and scheme changes included).
#include "cuda/gpu_sparse_allreduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "core/dtype.h"
#include "test/gpu/gpu_ranks.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda::testing {
namespace {

struct Case {
  int64_t numRows = 1;
  int64_t rowSize = 1;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  Scheme scheme = Scheme::kZen;
  bool denseInput = false;
  bool denseOutput = false;
  bool ownOutput = false;  // dense output into a caller buffer (denseOutputView)
  uint64_t seed = 0;
};

std::string describe(const Case& c, int n) {
  return fmt::format(
      "n={} scheme={} dtype={} op={} rows={} rowSize={} denseIn={} denseOut={} "
      "own={} seed={}",
      n, schemeName(c.scheme), dataTypeName(c.dtype), reduceOpName(c.op), c.numRows, c.rowSize,
      c.denseInput, c.denseOutput, c.ownOutput, c.seed);
}

// One rank's input in doubles (small integers, zero included; repeated and skewed indices).
struct HostInput {
  std::vector<int64_t> indices;
  std::vector<double> values;  // nnz x rowSize
};

HostInput makeInput(const Case& c, int rank) {
  std::mt19937_64 rng(c.seed * 1000003 + rank);
  HostInput in;
  if (rng() % 5 == 0) return in;  // some ranks send nothing
  const int64_t maxNnz = std::min<int64_t>(2 * c.numRows + 3, 4000);
  const int64_t nnz = static_cast<int64_t>(rng() % static_cast<uint64_t>(maxNnz + 1));
  const int64_t hot = std::max<int64_t>(1, c.numRows / 10);
  for (int64_t i = 0; i < nnz; ++i) {
    const bool skewed = rng() % 2 == 0;
    in.indices.push_back(
        static_cast<int64_t>(rng() % static_cast<uint64_t>(skewed ? hot : c.numRows)));
    for (int64_t k = 0; k < c.rowSize; ++k) {
      in.values.push_back(static_cast<double>(static_cast<int>(rng() % 9) - 4));
    }
  }
  return in;
}

// The rows of one input, repeats summed (touched rows only: shapes reach 200003 x 16).
using RowMap = std::map<int64_t, std::vector<double>>;

RowMap coalesce(const Case& c, const HostInput& in) {
  RowMap rows;
  for (size_t e = 0; e < in.indices.size(); ++e) {
    auto& row = rows[in.indices[e]];
    row.resize(static_cast<size_t>(c.rowSize), 0.0);
    for (int64_t k = 0; k < c.rowSize; ++k) row[k] += in.values[e * c.rowSize + k];
  }
  return rows;
}

bool anyNonzero(const std::vector<double>& row) {
  return std::any_of(row.begin(), row.end(), [](double v) { return v != 0; });
}

// The rows an input sends: its indices, or the non-zero rows of a dense input.
std::set<int64_t> rowsSent(const Case& c, const HostInput& in, const RowMap& rows) {
  if (!c.denseInput) return std::set<int64_t>(in.indices.begin(), in.indices.end());
  std::set<int64_t> sent;
  for (const auto& [idx, row] : rows) {
    if (anyNonzero(row)) sent.insert(idx);
  }
  return sent;
}

std::vector<double> densify(const Case& c, const RowMap& rows) {
  std::vector<double> d(static_cast<size_t>(c.numRows * c.rowSize), 0.0);
  for (const auto& [idx, row] : rows) {
    std::copy(row.begin(), row.end(), d.begin() + idx * c.rowSize);
  }
  return d;
}

std::vector<uint8_t> encode(DataType dtype, const std::vector<double>& v) {
  const size_t es = dataTypeSize(dtype);
  std::vector<uint8_t> bytes(v.size() * es);
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) {
      const T x = fromAccumulator<T, AccumulatorT<T>>(static_cast<AccumulatorT<T>>(v[i]));
      std::memcpy(bytes.data() + i * es, &x, es);
    }
  });
  return bytes;
}

double decodeAt(DataType dtype, const uint8_t* p) {
  return dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T x;
    std::memcpy(&x, p, sizeof(T));
    return static_cast<double>(toAccumulator<AccumulatorT<T>>(x));
  });
}

bool isInteger(DataType d) {
  return d == DataType::kInt32 || d == DataType::kInt64;
}

// `magnitude`: the sum over ranks of |each rank's coalesced element| (partial sums can exceed
// the result, and 16-bit roundings are relative to them).
double tolerance(const Case& c, int n, double magnitude) {
  if (isInteger(c.dtype)) return 0;
  // NCCL sums 16-bit floats in 16 bits; hc rounds its set to the dtype after every merge.
  double rounds = 1;
  if (c.scheme == Scheme::kDense && n > 1) rounds = n;
  if (c.scheme == Scheme::kHc) rounds = 2 + std::log2(static_cast<double>(n));
  switch (c.dtype) {
    case DataType::kBFloat16:
      return rounds * 8e-3 * magnitude + 1e-6;
    case DataType::kFloat16:
      return rounds * 1e-3 * magnitude + 1e-6;
    default:
      return c.op == ReduceOp::kSum ? 0 : 1e-6 * magnitude + 1e-9;
  }
}

// Runs one case on this rank and checks it against the reference.
void runCase(const Case& c,
             RankContext& ctx,
             GpuSparseAllreduceWorkspace* ws,
             GpuSparseAllreduceResult* result) {
  const int n = ctx.size;
  const std::string what = describe(c, n);
  // Reference: every rank's input, summed (touched rows only; other rows are zero).
  RowMap want;
  RowMap magnitude;
  std::set<int64_t> sent;
  HostInput mine;
  RowMap mineRows;
  for (int p = 0; p < n; ++p) {
    HostInput in = makeInput(c, p);
    RowMap rows = coalesce(c, in);
    for (const auto& [idx, row] : rows) {
      auto& acc = want[idx];
      auto& mag = magnitude[idx];
      acc.resize(static_cast<size_t>(c.rowSize), 0.0);
      mag.resize(static_cast<size_t>(c.rowSize), 0.0);
      for (int64_t k = 0; k < c.rowSize; ++k) {
        acc[k] += row[k];
        mag[k] += std::abs(row[k]);
      }
    }
    const std::set<int64_t> r = rowsSent(c, in, rows);
    sent.insert(r.begin(), r.end());
    if (p == ctx.rank) {
      mine = std::move(in);
      mineRows = std::move(rows);
    }
  }
  if (c.op == ReduceOp::kAverage) {
    for (auto& [idx, row] : want) {
      for (double& v : row) {
        v = isInteger(c.dtype) ? static_cast<double>(static_cast<int64_t>(v) / n) : v / n;
      }
    }
  }
  std::set<int64_t> wantRows;
  if (c.scheme == Scheme::kDense) {
    for (const auto& [idx, row] : want) {
      if (anyNonzero(row)) wantRows.insert(idx);
    }
  } else {
    wantRows = sent;
  }
  const std::vector<double> zeroRow(static_cast<size_t>(c.rowSize), 0.0);
  auto wantAt = [&](int64_t row, int64_t k) {
    auto it = want.find(row);
    return it == want.end() ? zeroRow[k] : it->second[k];
  };

  // Device input.
  const size_t es = dataTypeSize(c.dtype);
  const size_t rowBytes = static_cast<size_t>(c.rowSize) * es;
  DeviceBuffer dIdx, dVal, dDense, dOut;
  GpuSparseAllreduceOptions o;
  o.comm = ctx.comm;
  o.op = c.op;
  o.scheme = c.scheme;
  o.denseOutput = c.denseOutput;
  o.stream = ctx.stream;
  o.workspace = ws;
  o.seed = c.seed;
  if (c.denseInput) {
    ASSERT_OK(upload(encode(c.dtype, densify(c, mineRows)), &dDense));
    o.denseInput.data = dDense.data();
    o.denseInput.dtype = c.dtype;
    o.denseInput.shape = TensorShape({c.numRows, c.rowSize});
    o.denseInput.device = Device::cuda(ctx.rank);
  } else {
    ASSERT_OK(upload(mine.indices, &dIdx));
    ASSERT_OK(upload(encode(c.dtype, mine.values), &dVal));
    o.input.indices = mine.indices.empty() ? nullptr : dIdx.as<const int64_t>();
    o.input.values = mine.indices.empty() ? nullptr : dVal.data();
    o.input.nnz = static_cast<int64_t>(mine.indices.size());
    o.input.numRows = c.numRows;
    o.input.rowSize = c.rowSize;
    o.input.dtype = c.dtype;
    o.input.device = Device::cuda(ctx.rank);
  }
  const size_t denseBytes = static_cast<size_t>(c.numRows) * rowBytes;
  if (c.denseOutput && c.ownOutput) {
    ASSERT_OK(dOut.reserve(denseBytes));
    ASSERT_CUDA(cudaMemset(dOut.data(), kPoisonValueByte, denseBytes));
    o.denseOutputView.data = dOut.data();
    o.denseOutputView.dtype = c.dtype;
    o.denseOutputView.shape = TensorShape({c.numRows, c.rowSize});
    o.denseOutputView.device = Device::cuda(ctx.rank);
  } else if (c.denseOutput) {
    ASSERT_OK(result->dense.reserve(denseBytes));
    ASSERT_CUDA(cudaMemset(result->dense.data(), kPoisonValueByte, denseBytes));
  } else {
    result->sparse.dtype = c.dtype;
    result->sparse.rowSize = c.rowSize;
    ASSERT_OK(result->sparse.reserve(static_cast<int64_t>(wantRows.size()) + 1));
    ASSERT_CUDA(cudaMemset(result->sparse.values.data(), kPoisonValueByte,
                           (wantRows.size() + 1) * rowBytes));
    ASSERT_CUDA(cudaMemset(result->sparse.indices.data(), kPoisonPositionByte,
                           (wantRows.size() + 1) * sizeof(int64_t)));
  }

  const Status s = gpuSparseAllreduce(o, result);
  ASSERT_TRUE(s.isOk()) << what << ": " << s.toString();
  EXPECT_EQ(result->stats.scheme, c.scheme) << what;

  size_t bad = 0;
  auto check = [&](int64_t row, const uint8_t* got) {
    for (int64_t k = 0; k < c.rowSize; ++k) {
      const double w = wantAt(row, k);
      const double h = decodeAt(c.dtype, got + k * es);
      auto m = magnitude.find(row);
      const double mag = m == magnitude.end() ? 0.0 : m->second[k];
      if (!(std::abs(h - w) <= tolerance(c, n, mag))) {
        if (bad++ < 3) {
          ADD_FAILURE() << what << " rank " << ctx.rank << ": row " << row << " element " << k
                        << " got " << h << ", want " << w;
        }
      }
    }
  };
  if (c.denseOutput) {
    const void* out = c.ownOutput ? dOut.data() : result->dense.data();
    const auto got = download<uint8_t>(out, denseBytes);
    for (int64_t i = 0; i < c.numRows; ++i) check(i, got.data() + i * rowBytes);
  } else {
    // A garbage count would have toHost allocate (and copy) that many rows: stop here instead.
    ASSERT_TRUE(result->sparse.nnz >= 0 && result->sparse.nnz <= c.numRows)
        << what << ": " << result->sparse.nnz << " output rows of " << c.numRows;
    SparseTensor host;
    ASSERT_OK(result->sparse.toHost(&host));
    std::set<int64_t> rows;
    for (int64_t e = 0; e < host.nnz(); ++e) {
      const int64_t idx = host.indices[e];
      ASSERT_TRUE(idx >= 0 && idx < c.numRows) << what << ": output index " << idx;
      EXPECT_TRUE(rows.insert(idx).second) << what << ": row " << idx << " twice";
      check(idx, reinterpret_cast<const uint8_t*>(host.values.data()) + e * rowBytes);
    }
    EXPECT_EQ(rows, wantRows) << what << ": " << rows.size() << " rows, want " << wantRows.size();
    EXPECT_EQ(result->stats.outputNnz, static_cast<int64_t>(wantRows.size())) << what;
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(GpuSparseAllreduce, EverySchemeMatchesTheDenseReference) {
  const uint64_t seed = testSeed();
  const int64_t rowChoices[] = {1, 13, 1000, 200003};
  const int64_t sizeChoices[] = {1, 3, 16};
  for (int n : testRankCounts()) {
    std::mt19937_64 rng(seed + n);
    std::vector<Case> cases;
    for (Scheme scheme :
         {Scheme::kZen, Scheme::kHc, Scheme::kAgSparse, Scheme::kBlocks, Scheme::kDense}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                             DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
        for (int variant = 0; variant < 8; ++variant) {
          Case c;
          c.scheme = scheme;
          c.dtype = dtype;
          c.op = (variant & 1) ? ReduceOp::kAverage : ReduceOp::kSum;
          c.denseInput = (variant & 2) != 0;
          c.denseOutput = (variant & 4) != 0;
          c.ownOutput = c.denseOutput && rng() % 2 == 0;
          c.numRows = rowChoices[rng() % 4];
          c.rowSize = sizeChoices[rng() % 3];
          c.seed = rng();
          cases.push_back(c);
        }
      }
    }
    runRanks(n, [&](RankContext& ctx) {
      GpuSparseAllreduceWorkspace ws;
      GpuSparseAllreduceResult result;
      for (const Case& c : cases) {
        runCase(c, ctx, &ws, &result);
        if (::testing::Test::HasFatalFailure()) return;
      }
    });
  }
}

TEST(GpuSparseAllreduce, WithoutAWorkspaceAndWithNothingToSend) {
  for (int n : testRankCounts()) {
    runRanks(n, [&](RankContext& ctx) {
      for (Scheme scheme :
           {Scheme::kZen, Scheme::kHc, Scheme::kAgSparse, Scheme::kBlocks, Scheme::kDense}) {
        GpuSparseAllreduceOptions o;
        o.comm = ctx.comm;
        o.scheme = scheme;
        o.stream = ctx.stream;
        o.input.numRows = 1000;
        o.input.rowSize = 2;
        o.input.device = Device::cuda(ctx.rank);
        o.denseOutput = true;
        GpuSparseAllreduceResult result;
        ASSERT_OK(result.dense.reserve(8000));
        ASSERT_CUDA(cudaMemset(result.dense.data(), kPoisonValueByte, 8000));
        ASSERT_OK(gpuSparseAllreduce(o, &result));
        const auto got = download<float>(result.dense.data(), 2000);
        EXPECT_EQ(std::count(got.begin(), got.end(), 0.0f), 2000) << schemeName(scheme);
        o.denseOutput = false;
        ASSERT_OK(gpuSparseAllreduce(o, &result));
        EXPECT_EQ(result.sparse.nnz, 0);
      }
    });
  }
}

TEST(GpuSparseAllreduce, BadArgumentsFailOnEveryRank) {
  for (int n : testRankCounts()) {
    runRanks(n, [&](RankContext& ctx) {
      std::vector<int64_t> indices = {0, 5, ctx.rank == n - 1 ? 1000 : 7};
      std::vector<float> values = {1, 2, 3};
      DeviceBuffer dIdx, dVal;
      ASSERT_OK(upload(indices, &dIdx));
      ASSERT_OK(upload(values, &dVal));
      GpuSparseAllreduceOptions o;
      o.comm = ctx.comm;
      o.stream = ctx.stream;
      o.input.indices = dIdx.as<const int64_t>();
      o.input.values = dVal.data();
      o.input.nnz = 3;
      o.input.numRows = 1000;
      o.input.device = Device::cuda(ctx.rank);
      GpuSparseAllreduceResult result;
      Status s = gpuSparseAllreduce(o, &result);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_NE(s.message().find("index 1000 at entry 2"), std::string::npos) << s.message();

      indices[2] = 7;
      ASSERT_OK(upload(indices, &dIdx));
      o.input.indices = dIdx.as<const int64_t>();
      if (n > 1) {
        o.seed = ctx.rank == 1 ? 1 : 2;
        s = gpuSparseAllreduce(o, &result);
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
        EXPECT_NE(s.message().find("seed"), std::string::npos) << s.message();
        o.seed = 2;
      }
      o.scheme = static_cast<Scheme>(99);  // no such scheme
      EXPECT_EQ(gpuSparseAllreduce(o, &result).code(), StatusCode::kUnimplemented);
      o.scheme = Scheme::kAuto;
      ASSERT_OK(gpuSparseAllreduce(o, &result));
      EXPECT_EQ(result.stats.scheme, Scheme::kZen);
      EXPECT_EQ(result.sparse.nnz, 3);
    });
  }
}

}  // namespace
}  // namespace zen::cuda::testing
