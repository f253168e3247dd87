// Reduce-scatter and alltoall on every backend: Transport::reducescatter (the contract: every
// dtype and op, uneven and empty blocks, the ring's byte counters) and the free functions the
// CPU executor calls, ops::reducescatter (a fused bucket, pieces split as Horovod splits them,
// a rank without a tensor contributing the identity) and ops::alltoall (uneven splits, empty
// pieces). Results are checked in closed form. Linked into zen_ops_test (in-process and TCP
// ranks as threads) and zen_ops_mpi_test (mpirun), which instantiate TransportTest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/float16.h"
#include "ops/alltoall.h"
#include "ops/reduce.h"
#include "ops/reducescatter.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

// Rank r's element g: small integers (sums), the transport tests' values for min, max and
// product (transport_harness.h): exact in every dtype and any order, so the reference is exact.
double valueOf(ReduceOp op, int r, size_t g, bool integral) {
  switch (op) {
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return minMaxValue(r, g);
    case ReduceOp::kProduct:
      return productValue(r, g, integral);
    default:
      return (r + 1) * (static_cast<double>(g % 13) - 6);
  }
}

double reference(ReduceOp op, int n, size_t g, bool integral) {
  double acc = valueOf(op, 0, g, integral);
  for (int r = 1; r < n; ++r) {
    const double v = valueOf(op, r, g, integral);
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    if (op == ReduceOp::kMax) acc = std::max(acc, v);
    if (op == ReduceOp::kProduct) acc *= v;
    if (op == ReduceOp::kSum) acc += v;
  }
  return acc;
}

// An average as the executors compute it (and Horovod): the sum, rounded to T, times 1/n in
// T's accumulator type (integers: the quotient), rounded to T.
template <typename T>
double averaged(double sum, int n) {
  using Acc = AccumulatorT<T>;
  if constexpr (std::is_integral_v<T>) {
    return static_cast<double>(static_cast<Acc>(sum) / n);
  } else {
    const Acc rounded = toAccumulator<Acc>(fromDouble<T>(sum));
    return toDouble(fromAccumulator<T>(rounded * static_cast<Acc>(1.0 / n)));
  }
}

template <typename T>
void checkReducescatter(Transport& t,
                        DataType dtype,
                        ReduceOp op,
                        const std::vector<size_t>& counts) {
  const int n = t.size();
  const int me = t.rank();
  const bool integral = std::is_integral_v<T>;
  size_t total = 0;
  size_t mineAt = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me) mineAt = total;
    total += counts[p];
  }
  std::vector<T> data(total);
  for (size_t g = 0; g < total; ++g) data[g] = fromDouble<T>(valueOf(op, me, g, integral));
  t.resetCounters();
  ASSERT_TRUE(t.reducescatter(data.data(), counts, dtype, op).isOk())
      << dataTypeName(dtype) << " " << reduceOpName(op);
  const uint64_t sent = t.counters().totalSent();
  for (size_t i = 0; i < counts[me]; ++i) {
    ASSERT_EQ(toDouble(data[mineAt + i]), reference(op, n, mineAt + i, integral))
        << dataTypeName(dtype) << " " << reduceOpName(op) << " element " << i << " of block " << me;
  }
  // The ring: every block but its own leaves each rank once, in the wire dtype.
  const uint64_t wire = dataTypeSize(wireDataType(dtype));
  EXPECT_EQ(sent, n == 1 ? 0 : (total - counts[me]) * wire) << dataTypeName(dtype);
  EXPECT_EQ(sumOverRanks(t, sent), n == 1 ? 0 : uint64_t(n - 1) * total * wire);
}

template <typename T>
void checkEveryOp(Transport& t, DataType dtype, const std::vector<size_t>& counts) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    checkReducescatter<T>(t, dtype, op, counts);
  }
}

TEST_P(TransportTest, ReducescatterEveryDtypeAndOpInClosedForm) {
  run([&](Transport& t) {
    const int n = t.size();
    static constexpr size_t kUneven[] = {3, 0, 5, 1, 1001, 0, 7};
    std::vector<std::vector<size_t>> layouts = {
        std::vector<size_t>(n, 4099), std::vector<size_t>(n, 0), {}};
    for (int p = 0; p < n; ++p) layouts[2].push_back(kUneven[p % 7]);
    for (const auto& counts : layouts) {
      checkEveryOp<float>(t, DataType::kFloat32, counts);
      checkEveryOp<double>(t, DataType::kFloat64, counts);
      checkEveryOp<int32_t>(t, DataType::kInt32, counts);
      checkEveryOp<int64_t>(t, DataType::kInt64, counts);
      checkEveryOp<Half>(t, DataType::kFloat16, counts);
      checkEveryOp<BFloat16>(t, DataType::kBFloat16, counts);
    }
  });
}

// Blocks larger than one MPI chunk (1000 bytes here): the MPI backend stages rounds of every
// block; the others do what they always do.
TEST_P(TransportTest, ReducescatterBlocksLargerThanOneChunk) {
  RankOptions options;
  options.mpiMaxChunkBytes = 1000;
  run(
      [&](Transport& t) {
        std::vector<size_t> counts;
        for (int p = 0; p < t.size(); ++p) counts.push_back(p % 3 == 1 ? 0 : 300 + 257 * p);
        checkReducescatter<double>(t, DataType::kFloat64, ReduceOp::kSum, counts);
        checkReducescatter<Half>(t, DataType::kFloat16, ReduceOp::kMax, counts);
        checkReducescatter<int32_t>(t, DataType::kInt32, ReduceOp::kProduct, counts);
      },
      options);
}

TEST_P(TransportTest, ReducescatterRefusesBadArgumentsWithoutBreaking) {
  run([&](Transport& t) {
    const int n = t.size();
    std::vector<float> x(static_cast<size_t>(n), 1.0f);
    const std::vector<size_t> ones(static_cast<size_t>(n), 1);
    EXPECT_EQ(t.reducescatter(x.data(), std::vector<size_t>(n + 1, 0), DataType::kFloat32).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(t.reducescatter(x.data(), ones, DataType::kFloat32, ReduceOp::kAverage).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(t.reducescatter(nullptr, ones, DataType::kFloat32).code(),
              StatusCode::kInvalidArgument);
    ASSERT_TRUE(t.reducescatter(x.data(), ones, DataType::kFloat32).isOk());
    EXPECT_EQ(x[t.rank()], static_cast<float>(n));
  });
}

// ops::reducescatter over a bucket: rows split as Horovod splits them (7 rows over 4 ranks:
// 2, 2, 2, 1; 2 rows: 1, 1, 0, 0), a tensor of no rows, and one that rank 1 has not (joined:
// the op's identity), with Sum, Average and Max, in float32 and int32.
template <typename T>
void checkBucket(Transport& t, DataType dtype, ReduceOp op) {
  const int n = t.size();
  const int me = t.rank();
  const bool integral = std::is_integral_v<T>;
  struct Spec {
    int64_t rows;
    int64_t rowElements;
    bool missingOnRank1;
  };
  const std::vector<Spec> specs = {{7, 3, false}, {2, 1, false}, {0, 5, false}, {5, 2, true}};
  // Element e of tensor k on rank r (Average: multiples of n, so the mean is an integer).
  auto value = [&](int k, int r, int64_t e) {
    const double v = valueOf(op == ReduceOp::kMax ? op : ReduceOp::kSum, r,
                             static_cast<size_t>(e + 100 * k), integral);
    return op == ReduceOp::kAverage ? v * n : v;
  };
  std::vector<std::vector<T>> inputs, outputs;
  std::vector<std::byte> scratch;
  std::vector<ExecPhase> phases;
  ReducescatterOptions o;
  o.transport = &t;
  o.dtype = dtype;
  o.op = op;
  o.scratch = &scratch;
  o.phases = &phases;
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    inputs.emplace_back(static_cast<size_t>(s.rows * s.rowElements));
    for (size_t e = 0; e < inputs[k].size(); ++e) {
      inputs[k][e] = fromDouble<T>(value(static_cast<int>(k), me, static_cast<int64_t>(e)));
    }
    outputs.emplace_back(static_cast<size_t>(scatterRows(s.rows, n, me) * s.rowElements),
                         fromDouble<T>(-99));
    ReducescatterTensor x;
    x.rows = s.rows;
    x.rowElements = s.rowElements;
    if (!(s.missingOnRank1 && me == 1)) {
      x.input = inputs[k].data();
      x.output = outputs[k].data();
    }
    o.tensors.push_back(x);
  }
  ASSERT_TRUE(reducescatter(o).isOk()) << dataTypeName(dtype) << " " << reduceOpName(op);
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0].name, "FUSE");
  EXPECT_EQ(phases[1].name, wirePhaseName(t, "reducescatter"));
  for (size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    if (s.missingOnRank1 && me == 1) {
      for (const T& v : outputs[k]) EXPECT_EQ(toDouble(v), -99.0);  // not written
      continue;
    }
    const int64_t first = scatterOffset(s.rows, n, me) * s.rowElements;
    for (size_t i = 0; i < outputs[k].size(); ++i) {
      const int64_t e = first + static_cast<int64_t>(i);
      double want = op == ReduceOp::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int r = 0; r < n; ++r) {
        if (s.missingOnRank1 && r == 1) continue;  // the identity
        const double v = value(static_cast<int>(k), r, e);
        want = op == ReduceOp::kMax ? std::max(want, v) : want + v;
      }
      if (op == ReduceOp::kAverage) want = averaged<T>(want, n);
      ASSERT_EQ(toDouble(outputs[k][i]), want)
          << "tensor " << k << " element " << e << " on rank " << me << " " << reduceOpName(op);
    }
  }
}

TEST_P(TransportTest, ReducescatterBucketSplitsRowsAsHorovodAndTakesMissingTensors) {
  run([&](Transport& t) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
      checkBucket<float>(t, DataType::kFloat32, op);
      checkBucket<int32_t>(t, DataType::kInt32, op);
    }
  });
}

// ops::alltoall: rank s sends (s + 2d) % 4 rows to rank d (some empty, its own included), each
// row 12 bytes naming (s, d, row).
TEST_P(TransportTest, AlltoallUnevenSplitsWithEmptyPieces) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    auto rowsFrom = [](int s, int d) { return static_cast<int64_t>((s + 2 * d) % 4); };
    auto row = [](int s, int d, int k) {
      std::vector<int32_t> v = {s, d, k};
      return v;
    };
    AlltoallOptions o;
    o.transport = &t;
    o.rowBytes = 3 * sizeof(int32_t);
    std::vector<int32_t> input;
    for (int d = 0; d < n; ++d) {
      o.sendRows.push_back(rowsFrom(me, d));
      o.recvRows.push_back(rowsFrom(d, me));
      for (int k = 0; k < rowsFrom(me, d); ++k) {
        for (int32_t v : row(me, d, k)) input.push_back(v);
      }
    }
    o.input = input.data();
    std::vector<ExecPhase> phases;
    o.phases = &phases;
    std::vector<std::byte> out;
    ASSERT_TRUE(alltoall(o, &out).isOk());
    std::vector<int32_t> want;
    for (int s = 0; s < n; ++s) {
      for (int k = 0; k < rowsFrom(s, me); ++k) {
        for (int32_t v : row(s, me, k)) want.push_back(v);
      }
    }
    ASSERT_EQ(out.size(), want.size() * sizeof(int32_t));
    std::vector<int32_t> got(want.size());
    if (!got.empty()) std::memcpy(got.data(), out.data(), out.size());
    EXPECT_EQ(got, want);
    ASSERT_EQ(phases.size(), 2u);
    EXPECT_EQ(phases[0].name, wirePhaseName(t, "alltoall"));
    // Splits that do not fit the input's own piece are refused before any wire.
    AlltoallOptions bad = o;
    bad.recvRows[me] += 1;
    EXPECT_EQ(alltoall(bad, &out).code(), StatusCode::kInvalidArgument);
    bad = o;
    bad.sendRows.pop_back();
    EXPECT_EQ(alltoall(bad, &out).code(), StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace zen::ops::testing
