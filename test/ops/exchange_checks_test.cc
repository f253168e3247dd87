// The alltoall's and reducescatter's plan checks both executors share (ops/exchange_checks.h)
// and the reducescatter's split (ops::scatterPiece, ops::scatterBlocks): this rank's rows read
// off random split matrices against direct indexing, pieces against Horovod's closed form, and
// every plan a rank cannot run refused with its message, by the check and by the CPU executor
// (test/runtime/runtime_cuda_plan_check_test.cc holds the CUDA executor to the same messages).
#include "ops/exchange_checks.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu_executor.h"
#include "ops/inprocess_transport.h"

namespace zen::ops {
namespace {

std::mt19937_64 freshRng() {
  const uint64_t seed = std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return std::mt19937_64(seed);
}

Response alltoallResponse(std::vector<int64_t> splits, TensorShape shape, DataType dtype) {
  Response r;
  r.type = ResponseType::kAlltoall;
  r.dtype = dtype;
  r.tensorNames = {"x"};
  r.shapes = {std::move(shape)};
  r.splits = std::move(splits);
  return r;
}

TensorEntry entryOfShape(TensorShape shape) {
  TensorEntry e;
  e.request.name = "x";
  e.input.shape = shape;
  e.output.shape = std::move(shape);
  return e;
}

// The CPU executor's verdict on one rank (the same plan fails every rank before the wire).
Status cpuExecute(const Response& r, const std::vector<TensorEntry*>& entries) {
  auto transport = createInProcessTransport(makeInProcessHub(1), TransportOptions{});
  EXPECT_TRUE(transport.isOk()) << transport.status().toString();
  if (!transport.isOk()) return transport.status();
  CpuExecutor executor(std::move(transport).value(), CpuExecutorOptions{});
  BucketReport report;
  return executor.execute(r, entries, &report);
}

void expectRefused(const Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
}

// Rank me sends row me of the matrix and receives column me, rank 0's rows first.
TEST(ExchangeChecks, AlltoallRowsAreThisRanksRowAndColumnOfTheSplits) {
  std::mt19937_64 rng = freshRng();
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<int64_t> splits(static_cast<size_t>(n * n));
    for (int64_t& x : splits) x = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 5);
    const std::vector<int64_t> trailing = {1 + static_cast<int64_t>(rng() % 3), 2};
    const DataType dtype = trial % 2 ? DataType::kFloat16 : DataType::kFloat64;
    for (int me = 0; me < n; ++me) {
      const auto row = splits.begin() + me * n;
      const int64_t rows = std::accumulate(row, row + n, int64_t{0});
      TensorEntry e = entryOfShape(TensorShape({rows, trailing[0], trailing[1]}));
      const Response r =
          alltoallResponse(splits, TensorShape({7, trailing[0], trailing[1]}), dtype);
      Result<AlltoallRows> a = checkAlltoall(r, {&e}, n, me);
      ASSERT_TRUE(a.isOk()) << a.status().toString();
      int64_t received = 0;
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(a.value().sendRows[q], splits[static_cast<size_t>(me * n + q)]);
        EXPECT_EQ(a.value().recvRows[q], splits[static_cast<size_t>(q * n + me)]);
        received += splits[static_cast<size_t>(q * n + me)];
      }
      EXPECT_EQ(a.value().sendRows.size(), static_cast<size_t>(n));
      EXPECT_EQ(a.value().recvRows.size(), static_cast<size_t>(n));
      EXPECT_EQ(a.value().rowBytes, static_cast<size_t>(trailing[0] * 2) * dataTypeSize(dtype));
      EXPECT_EQ(a.value().outputShape, TensorShape({received, trailing[0], trailing[1]}));
    }
  }
}

TEST(ExchangeChecks, AlltoallPlansNoRankCanRunAreRefusedWithTheSameMessageByTheCpuExecutor) {
  TensorEntry e = entryOfShape(TensorShape({4, 2}));
  const Response ok = alltoallResponse({4}, TensorShape({4, 2}), DataType::kFloat32);
  ASSERT_TRUE(checkAlltoall(ok, {&e}, 1, 0).isOk());
  Response twoRanks = ok;
  twoRanks.splits = {1, 3, 2, 2};
  Response negative = ok;
  negative.splits = {-1};
  TensorEntry five = entryOfShape(TensorShape({5, 2}));
  TensorEntry scalar = entryOfShape(TensorShape({}));
  const Response scalarPlan = alltoallResponse({0}, TensorShape({}), DataType::kFloat32);
  struct Case {
    const Response* r;
    std::vector<TensorEntry*> entries;
    std::string message;
  };
  const Case cases[] = {
      {&twoRanks, {&e}, "alltoall: 4 splits for 1 ranks"},
      {&negative, {&e}, "alltoall: the plan holds a split of -1 rows"},
      {&ok, {&five}, "alltoall: the plan sends 4 rows, the input has 5"},
      {&scalarPlan, {&scalar}, "alltoall: tensor 'x' has no first dimension"},
      // Not posted here (joined): negotiation never produces it.
      {&ok, {nullptr}, "alltoall: 1 tensors, 0 posted here; expected one"},
  };
  for (const Case& c : cases) {
    expectRefused(checkAlltoall(*c.r, c.entries, 1, 0).status(), c.message);
    const Status cpu = cpuExecute(*c.r, c.entries);
    expectRefused(cpu, c.message);
    EXPECT_NE(cpu.message().find("alltoall of 'x'"), std::string::npos) << cpu.message();
  }
  // Fused (negotiation never fuses an alltoall), or a rank outside the job.
  expectRefused(checkAlltoall(ok, {&e, &e}, 1, 0).status(),
                "alltoall: 2 tensors, 2 posted here; expected one");
  expectRefused(checkAlltoall(ok, {&e}, 1, 1).status(), "alltoall: 1 splits for 1 ranks");
}

TEST(ExchangeChecks, ReducescatterTensorsAreThePlansShapesAndThisRanksBuffers) {
  float in[12] = {};
  float out[6] = {};
  TensorEntry a = entryOfShape(TensorShape({4, 3}));
  a.input.data = in;
  a.output.data = out;
  Response r;
  r.type = ResponseType::kReducescatter;
  r.tensorNames = {"a", "b"};
  r.shapes = {TensorShape({4, 3}), TensorShape({5, 2, 2})};
  Result<std::vector<ReducescatterTensor>> t = checkReducescatter(r, {&a, nullptr});
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ASSERT_EQ(t.value().size(), 2u);
  EXPECT_EQ(t.value()[0].rows, 4);
  EXPECT_EQ(t.value()[0].rowElements, 3);
  EXPECT_EQ(t.value()[0].input, in);
  EXPECT_EQ(t.value()[0].output, out);
  // Joined: contributes the op's identity and keeps nothing.
  EXPECT_EQ(t.value()[1].rows, 5);
  EXPECT_EQ(t.value()[1].rowElements, 4);
  EXPECT_EQ(t.value()[1].input, nullptr);
  EXPECT_EQ(t.value()[1].output, nullptr);

  expectRefused(checkReducescatter(r, {&a}).status(), "reducescatter: 1 entries for 2 shapes");
  Response scalar = r;
  scalar.shapes[1] = TensorShape({});
  expectRefused(checkReducescatter(scalar, {&a, &a}).status(),
                "reducescatter: tensor 1 is a scalar");
  const Status cpu = cpuExecute(scalar, {&a, &a});
  expectRefused(cpu, "reducescatter: tensor 1 is a scalar");
  EXPECT_NE(cpu.message().find("reducescatter of 'a', 'b'"), std::string::npos) << cpu.message();
}

// Horovod's split: rows / size each, one more on the first rows % size ranks; the pieces tile
// the tensor in rank order, and rank p's block holds piece p of every tensor.
TEST(ExchangeChecks, ScatterPiecesTileEveryTensorInRankOrder) {
  for (int size = 1; size <= 7; ++size) {
    std::vector<ReducescatterTensor> tensors;
    for (int64_t rows : {0, 1, 5, 7, 16}) {
      ReducescatterTensor x;
      x.rows = rows;
      x.rowElements = 3;
      tensors.push_back(x);
    }
    std::vector<size_t> blocks(static_cast<size_t>(size), 0);
    for (const ReducescatterTensor& x : tensors) {
      size_t at = 0;
      for (int p = 0; p < size; ++p) {
        const ElementRange piece = scatterPiece(x, size, p);
        const int64_t rows = x.rows / size + (p < x.rows % size ? 1 : 0);
        EXPECT_EQ(piece.begin, at) << x.rows << " rows over " << size << ", rank " << p;
        EXPECT_EQ(piece.size(), static_cast<size_t>(rows * 3));
        at = piece.end;
        blocks[p] += piece.size();
      }
      EXPECT_EQ(at, static_cast<size_t>(x.rows * 3));
    }
    EXPECT_EQ(scatterBlocks(tensors, size), blocks);
  }
}

}  // namespace
}  // namespace zen::ops
