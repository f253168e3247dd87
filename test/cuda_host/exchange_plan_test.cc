// The CUDA executor's alltoall and reducescatter layouts (cuda/alltoall_plan.h,
// cuda/reducescatter_plan.h) on the CPU: every rank simulated on host memory, the NCCL
// collective replaced by its definition, each rank's result checked against a dense
// reference computed from the rows themselves (what the CPU executor returns; reductions and
// identities are the CPU executor's, ops/reduce.h, which the layouts do not use).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/alltoall_plan.h"
#include "cuda/reducescatter_plan.h"
#include "ops/reduce.h"

namespace zen::cuda {
namespace {

std::mt19937_64 freshRng() {
  const uint64_t seed = std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return std::mt19937_64(seed);
}

// ---- alltoall ----

Response alltoallResponse(const std::vector<std::vector<int64_t>>& splits,
                          const std::vector<int64_t>& trailing,
                          DataType dtype) {
  Response r;
  r.type = ResponseType::kAlltoall;
  r.dtype = dtype;
  r.tensorNames = {"a2a"};
  int64_t total = 0;
  for (const auto& row : splits) {
    r.splits.insert(r.splits.end(), row.begin(), row.end());
    total += std::accumulate(row.begin(), row.end(), int64_t{0});
  }
  std::vector<int64_t> dims = {total};
  dims.insert(dims.end(), trailing.begin(), trailing.end());
  r.shapes = {TensorShape(dims)};
  r.devices.assign(splits.size(), Device::cuda(0));
  return r;
}

TensorEntry entryWithInput(void* data, std::vector<int64_t> dims) {
  TensorEntry e;
  e.input.data = data;
  e.input.shape = TensorShape(std::move(dims));
  return e;
}

// Rank d's output is every rank s's rows [sum(splits[s][0..d)), + splits[s][d]) in rank order.
TEST(AlltoallPlan, EveryRankGetsItsRowsFromEverySenderInRankOrder) {
  std::mt19937_64 rng = freshRng();
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    const DataType dtype = trial % 3 == 0 ? DataType::kFloat16 : DataType::kFloat32;
    std::vector<int64_t> trailing;
    if (rng() % 2) trailing.push_back(1 + static_cast<int64_t>(rng() % 3));
    if (rng() % 4 == 0) trailing.push_back(2);
    int64_t rowElements = 1;
    for (int64_t d : trailing) rowElements *= d;
    const size_t rowBytes = static_cast<size_t>(rowElements) * dataTypeSize(dtype);
    std::vector<std::vector<int64_t>> splits(n, std::vector<int64_t>(n));
    for (auto& row : splits) {
      for (int64_t& x : row) x = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 5);
    }
    const Response r = alltoallResponse(splits, trailing, dtype);
    std::vector<std::vector<uint8_t>> input(n);
    for (int s = 0; s < n; ++s) {
      const int64_t rows = std::accumulate(splits[s].begin(), splits[s].end(), int64_t{0});
      input[s].resize(static_cast<size_t>(rows) * rowBytes);
      for (uint8_t& b : input[s]) b = static_cast<uint8_t>(rng());
    }
    std::vector<AlltoallPlan> plans;
    for (int s = 0; s < n; ++s) {
      std::vector<int64_t> dims = {static_cast<int64_t>(input[s].size() / rowBytes)};
      dims.insert(dims.end(), trailing.begin(), trailing.end());
      TensorEntry e = entryWithInput(input[s].data(), dims);
      Result<AlltoallPlan> p = planAlltoall(r, {&e}, n, s);
      ASSERT_TRUE(p.isOk()) << p.status().toString();
      plans.push_back(p.value());
      EXPECT_EQ(plans[s].rowBytes, rowBytes);
      EXPECT_EQ(plans[s].sendOffset.back(), input[s].size());
    }
    // The alltoallv: rank s's send segment d lands in rank d's receive segment s.
    for (int d = 0; d < n; ++d) {
      const AlltoallPlan& mine = plans[d];
      std::vector<uint8_t> output(mine.recvOffset.back(), 0xa5);
      for (int s = 0; s < n; ++s) {
        const size_t len = plans[s].sendOffset[d + 1] - plans[s].sendOffset[d];
        ASSERT_EQ(len, mine.recvOffset[s + 1] - mine.recvOffset[s]) << "from " << s << " to " << d;
        if (len > 0) {
          std::memcpy(output.data() + mine.recvOffset[s], input[s].data() + plans[s].sendOffset[d],
                      len);
        }
      }
      std::vector<uint8_t> expected;
      std::vector<int64_t> expectedSplits;
      for (int s = 0; s < n; ++s) {
        const int64_t first = std::accumulate(splits[s].begin(), splits[s].begin() + d, int64_t{0});
        for (int64_t row = first; row < first + splits[s][d]; ++row) {
          const uint8_t* at = input[s].data() + static_cast<size_t>(row) * rowBytes;
          expected.insert(expected.end(), at, at + rowBytes);
        }
        expectedSplits.push_back(splits[s][d]);
      }
      EXPECT_EQ(output, expected) << "trial " << trial << " rank " << d;
      EXPECT_EQ(mine.receivedSplits, expectedSplits);
      std::vector<int64_t> dims = {
          std::accumulate(expectedSplits.begin(), expectedSplits.end(), int64_t{0})};
      dims.insert(dims.end(), trailing.begin(), trailing.end());
      EXPECT_EQ(mine.outputShape, TensorShape(dims));
    }
  }
}

TEST(AlltoallPlan, RefusesAPlanItCannotRun) {
  float x[8] = {};
  TensorEntry e = entryWithInput(x, {4, 2});
  const Response ok = alltoallResponse({{1, 3}, {2, 2}}, {2}, DataType::kFloat32);
  ASSERT_TRUE(planAlltoall(ok, {&e}, 2, 0).isOk());
  // The splits of another job size.
  EXPECT_EQ(planAlltoall(ok, {&e}, 3, 0).status().code(), StatusCode::kInvalidArgument);
  // This rank's splits send 4 rows; an input of 5 does not add up.
  TensorEntry five = entryWithInput(x, {5, 2});
  const Status rows = planAlltoall(ok, {&five}, 2, 0).status();
  EXPECT_EQ(rows.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rows.message().find("the plan sends 4 rows, the input has 5"), std::string::npos)
      << rows.message();
  Response negative = ok;
  negative.splits[1] = -1;
  EXPECT_EQ(planAlltoall(negative, {&e}, 2, 0).status().code(), StatusCode::kInvalidArgument);
  // Not posted here (joined), or fused: negotiation never produces either.
  EXPECT_EQ(planAlltoall(ok, {nullptr}, 2, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(planAlltoall(ok, {&e, &e}, 2, 0).status().code(), StatusCode::kInvalidArgument);
  TensorEntry scalar = entryWithInput(x, {});
  EXPECT_EQ(planAlltoall(ok, {&scalar}, 2, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(AlltoallPlan, ZeroRowsEverywhereIsAnEmptyOutput) {
  TensorEntry e = entryWithInput(nullptr, {0, 3});
  const Response r = alltoallResponse({{0, 0}, {0, 0}}, {3}, DataType::kInt64);
  Result<AlltoallPlan> p = planAlltoall(r, {&e}, 2, 1);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ(p.value().recvOffset, (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(p.value().outputShape, TensorShape({0, 3}));
  EXPECT_EQ(p.value().receivedSplits, (std::vector<int64_t>{0, 0}));
}

// ---- reducescatter ----

// op over the `count` doubles at each of `parts` (Average: the sum divided by `ranks`), from
// the op's identity (what a joined rank contributes).
std::vector<double> reduced(ReduceOp op,
                            const std::vector<const double*>& parts,
                            size_t count,
                            int ranks) {
  std::vector<double> out(count);
  ops::fillIdentity(out.data(), count, DataType::kFloat64, op);
  for (const double* part : parts) ops::reduceInto(out.data(), part, count, DataType::kFloat64, op);
  if (op == ReduceOp::kAverage) {
    for (double& x : out) x /= ranks;
  }
  return out;
}

Response reducescatterResponse(const std::vector<std::vector<int64_t>>& shapes,
                               ReduceOp op,
                               int n) {
  Response r;
  r.type = ResponseType::kReducescatter;
  r.dtype = DataType::kFloat64;
  r.reduceOp = op;
  for (size_t i = 0; i < shapes.size(); ++i) {
    r.tensorNames.push_back("rs" + std::to_string(i));
    r.shapes.emplace_back(shapes[i]);
  }
  r.devices.assign(static_cast<size_t>(n), Device::cuda(0));
  return r;
}

// Every rank fuses (joined ranks: the op's identity), the reduce-scatter reduces block q over
// the ranks into rank q's block, each rank copies its block out (or, for a direct plan, the
// collective reads the input and writes the output; a joined rank stages the same bucket). Rank q's
// output of tensor i must be rows [scatterOffset, + scatterRows) of the element-wise reduction of
// the posting ranks' inputs.
TEST(ReducescatterPlan, EveryRankKeepsItsPieceOfTheReductionLikeTheCpuExecutor) {
  std::mt19937_64 rng = freshRng();
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    const ReduceOp op = ops[trial % 5];
    const size_t tensors = 1 + (trial % 4 == 0 ? 0 : rng() % 4);
    std::vector<std::vector<int64_t>> shapes(tensors);
    for (auto& s : shapes) {
      s.push_back(
          static_cast<int64_t>(rng() % (2 * static_cast<uint64_t>(n) + 2)));  // rows < n too
      if (rng() % 2) s.push_back(1 + static_cast<int64_t>(rng() % 3));
      if (rng() % 5 == 0) s.push_back(2);
    }
    const int joined = n > 1 && rng() % 3 == 0 ? static_cast<int>(rng() % n) : -1;
    const Response r = reducescatterResponse(shapes, op, n);
    // Inputs of small integers (products of them stay exact in double).
    std::vector<std::vector<std::vector<double>>> input(n,
                                                        std::vector<std::vector<double>>(tensors));
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < tensors; ++i) {
        input[p][i].resize(static_cast<size_t>(r.shapes[i].numElements()));
        for (double& x : input[p][i]) x = static_cast<double>(static_cast<int>(rng() % 5) - 2);
      }
    }
    std::vector<std::vector<std::vector<double>>> output(n,
                                                         std::vector<std::vector<double>>(tensors));
    std::vector<std::vector<TensorEntry>> store(n, std::vector<TensorEntry>(tensors));
    std::vector<std::vector<TensorEntry*>> entries(n);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < tensors; ++i) {
        const int64_t rows = scatterRows(shapes[i][0], n, p);
        output[p][i].assign(static_cast<size_t>(rows * r.shapes[i].rowSize()),
                            std::numeric_limits<double>::quiet_NaN());
        store[p][i].input.data = input[p][i].data();
        store[p][i].output.data = output[p][i].data();
        entries[p].push_back(p == joined ? nullptr : &store[p][i]);
      }
    }
    std::vector<ReducescatterPlan> plans;
    for (int p = 0; p < n; ++p) {
      Result<ReducescatterPlan> planned = planReducescatter(r, entries[p], n);
      ASSERT_TRUE(planned.isOk()) << planned.status().toString();
      plans.push_back(planned.value());
    }
    const ReducescatterPlan& plan = plans.front();
    const size_t block = plan.blockElements;
    // Padding: at most one row per tensor on top of the smallest block.
    size_t slack = 0;
    for (size_t i = 0; i < tensors; ++i) slack += static_cast<size_t>(r.shapes[i].rowSize());
    EXPECT_LE(block, *std::min_element(plan.used.begin(), plan.used.end()) + slack);
    // Each rank's send buffer: its input (direct) or its staging buffer after the copies in.
    // A joined rank stages a bucket the others run directly: the blocks must still agree.
    std::vector<std::vector<double>> staging(n, std::vector<double>(n * block, 1e300));
    std::vector<DenseFusionCopies> copies(n);
    std::vector<const double*> send(n);
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(plans[p].blockElements, block);
      EXPECT_EQ(plans[p].used, plan.used);
      EXPECT_EQ(plans[p].direct, tensors == 1 && p != joined && shapes[0][0] % n == 0);
      if (plans[p].direct) {
        send[p] = input[p][0].data();
        continue;
      }
      send[p] = staging[p].data();
      copies[p] = reducescatterCopies(plans[p], r, entries[p], p, staging[p].data());
      for (const CopyJob& j : copies[p].in) {
        ASSERT_NE(j.src, nullptr);
        std::memcpy(j.dst, j.src, j.bytes);
      }
      for (const CopyJob& j : copies[p].zeros) {
        EXPECT_EQ(p, joined);
        ops::fillIdentity(j.dst, j.bytes / sizeof(double), DataType::kFloat64, op);
      }
    }
    // The collective: block q of every send buffer, reduced, into rank q's receive buffer (its
    // output when direct, else its own staging block, in place), which it then copies out.
    for (int q = 0; q < n; ++q) {
      std::vector<const double*> blocks;
      for (int p = 0; p < n; ++p) blocks.push_back(send[p] + q * block);
      const std::vector<double> mine = reduced(op, blocks, block, n);
      if (plans[q].direct) {
        ASSERT_EQ(output[q][0].size(), block);
        output[q][0] = mine;
        continue;
      }
      std::copy(mine.begin(), mine.end(), staging[q].begin() + q * block);
      for (const CopyJob& j : copies[q].out) {
        const auto* src = static_cast<const double*>(j.src);
        ASSERT_GE(src, staging[q].data() + q * block);
        ASSERT_LE(src + j.bytes / sizeof(double), staging[q].data() + q * block + plan.used[q]);
        std::memcpy(j.dst, j.src, j.bytes);
      }
    }
    for (int q = 0; q < n; ++q) {
      if (q == joined) continue;
      for (size_t i = 0; i < tensors; ++i) {
        const int64_t rowSize = r.shapes[i].rowSize();
        const auto first = static_cast<size_t>(scatterOffset(shapes[i][0], n, q) * rowSize);
        std::vector<const double*> pieces;
        for (int p = 0; p < n; ++p) {
          if (p != joined) pieces.push_back(input[p][i].data() + first);
        }
        const std::vector<double> expected =
            reduced(op, pieces, static_cast<size_t>(scatterRows(shapes[i][0], n, q) * rowSize), n);
        EXPECT_EQ(output[q][i], expected)
            << "trial " << trial << " n=" << n << " " << reduceOpName(op) << " rank " << q
            << " tensor " << i << " joined " << joined;
      }
    }
  }
}

TEST(ReducescatterPlan, UnevenPiecesArePaddedToTheLargestBlock) {
  // 5 rows of 2 over 3 ranks: pieces of 2, 2, 1 rows; 1 row of 3: pieces of 1, 0, 0 rows.
  const Response r = reducescatterResponse({{5, 2}, {1, 3}}, ReduceOp::kSum, 3);
  TensorEntry a, b;
  Result<ReducescatterPlan> p = planReducescatter(r, {&a, &b}, 3);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  EXPECT_EQ(p.value().used, (std::vector<size_t>{7, 4, 2}));
  EXPECT_EQ(p.value().blockElements, 7u);
  EXPECT_FALSE(p.value().direct);
  // One tensor alone whose rows divide evenly runs without staging; 4 rows over 3 do not.
  EXPECT_TRUE(planReducescatter(reducescatterResponse({{6, 2}}, ReduceOp::kMax, 3), {&a}, 3)
                  .value()
                  .direct);
  EXPECT_FALSE(planReducescatter(reducescatterResponse({{4, 2}}, ReduceOp::kMax, 3), {&a}, 3)
                   .value()
                   .direct);
  EXPECT_FALSE(planReducescatter(reducescatterResponse({{6, 2}}, ReduceOp::kMax, 3), {nullptr}, 3)
                   .value()
                   .direct);
}

TEST(ReducescatterPlan, RefusesScalarsAndMismatchedEntries) {
  TensorEntry a;
  EXPECT_EQ(
      planReducescatter(reducescatterResponse({{}}, ReduceOp::kSum, 2), {&a}, 2).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(planReducescatter(reducescatterResponse({{4}}, ReduceOp::kSum, 2), {&a, &a}, 2)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zen::cuda
