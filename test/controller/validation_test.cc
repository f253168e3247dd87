// Error responses name the tensor, the field and the ranks; join with sparse tensors works.

#include "controller/validation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::makeRequest;
using testing::sparseRequest;

TableEntry entryOf(int size, const std::vector<Request>& requests) {
  TableEntry e;
  e.byRank.resize(static_cast<size_t>(size));
  for (const auto& q : requests) {
    e.byRank[static_cast<size_t>(q.rank)] = q;
    ++e.posted;
  }
  return e;
}

std::vector<bool> noneJoined(int size) {
  return std::vector<bool>(static_cast<size_t>(size));
}

std::string errorOf(const std::vector<Request>& requests, int size) {
  const Response r =
      buildResponse(requests.front().name, entryOf(size, requests), noneJoined(size));
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.tensorNames, std::vector<std::string>{requests.front().name});
  return r.errorMessage;
}

TEST(Validation, FormatsRankSetsCompactly) {
  EXPECT_EQ(formatRanks({2}), "rank 2");
  EXPECT_EQ(formatRanks({0, 1, 2, 3, 5}), "ranks 0-3, 5");
  EXPECT_EQ(formatRanks({1, 3, 4}), "ranks 1, 3-4");
}

TEST(Validation, DtypeMismatchNamesTensorAndRanks) {
  EXPECT_EQ(errorOf({makeRequest(0, "emb.weight", OpType::kAllreduce, DataType::kFloat32),
                     makeRequest(2, "emb.weight", OpType::kAllreduce, DataType::kFloat16)},
                    3),
            "tensor 'emb.weight': rank 2 sent dtype float16, rank 0 float32");
  EXPECT_EQ(errorOf({makeRequest(0, "w", OpType::kAllreduce, DataType::kFloat32),
                     makeRequest(1, "w", OpType::kAllreduce, DataType::kFloat32),
                     makeRequest(2, "w", OpType::kAllreduce, DataType::kFloat16),
                     makeRequest(3, "w", OpType::kAllreduce, DataType::kFloat64),
                     makeRequest(4, "w", OpType::kAllreduce, DataType::kFloat16)},
                    5),
            "tensor 'w': ranks 2, 4 sent dtype float16, rank 3 float64, ranks 0-1 float32");
}

TEST(Validation, OpMismatchIsReportedBeforeItsSymptoms) {
  EXPECT_EQ(errorOf({makeRequest(0, "x", OpType::kSparseAllreduce, DataType::kFloat32),
                     makeRequest(1, "x", OpType::kAllgather, DataType::kFloat16)},
                    2),
            "tensor 'x': rank 1 sent op allgather, rank 0 sparse_allreduce");
}

TEST(Validation, ShapeDeviceReduceOpRootAndRowSizeMismatches) {
  EXPECT_EQ(errorOf({makeRequest(0, "x", OpType::kAllreduce, DataType::kFloat32, {3, 4}),
                     makeRequest(1, "x", OpType::kAllreduce, DataType::kFloat32, {3, 5})},
                    2),
            "tensor 'x': rank 1 sent dense shape [3, 5], rank 0 [3, 4]");

  Request cpu = makeRequest(0, "x"), gpu = makeRequest(1, "x");
  gpu.device = Device::cuda(1);
  EXPECT_EQ(errorOf({cpu, gpu}, 2), "tensor 'x': rank 1 sent device kind cuda, rank 0 cpu");
  // Each rank has its own GPU: device indices may differ.
  cpu.device = Device::cuda(0);
  EXPECT_EQ(buildResponse("x", entryOf(2, {cpu, gpu}), noneJoined(2)).type,
            ResponseType::kAllreduce);

  Request sum = makeRequest(0, "x"), avg = makeRequest(1, "x");
  avg.reduceOp = ReduceOp::kAverage;
  EXPECT_EQ(errorOf({sum, avg}, 2), "tensor 'x': rank 1 sent reduce op average, rank 0 sum");
  Request mn = makeRequest(0, "x"), mx = makeRequest(1, "x");
  mn.reduceOp = ReduceOp::kMin;
  mx.reduceOp = ReduceOp::kMax;
  EXPECT_EQ(errorOf({mn, mx}, 2), "tensor 'x': rank 1 sent reduce op max, rank 0 min");
  Request p1 = makeRequest(1, "x");
  p1.reduceOp = ReduceOp::kProduct;
  EXPECT_EQ(errorOf({sum, p1}, 2), "tensor 'x': rank 1 sent reduce op product, rank 0 sum");
  Request mn1 = mn;
  mn1.rank = 1;
  const Response agreed = buildResponse("x", entryOf(2, {mn, mn1}), noneJoined(2));
  EXPECT_EQ(agreed.type, ResponseType::kAllreduce);
  EXPECT_EQ(agreed.reduceOp, ReduceOp::kMin);

  Request b0 = makeRequest(0, "p", OpType::kBroadcast),
          b1 = makeRequest(1, "p", OpType::kBroadcast);
  b1.rootRank = 1;
  EXPECT_EQ(errorOf({b0, b1}, 2), "tensor 'p': rank 1 sent root rank 1, rank 0 0");
  // Fields an op does not use are not compared.
  Request a0 = makeRequest(0, "y"), a1 = makeRequest(1, "y");
  a1.rootRank = 1;
  EXPECT_EQ(buildResponse("y", entryOf(2, {a0, a1}), noneJoined(2)).type, ResponseType::kAllreduce);

  Request s0 = sparseRequest(0, "e", 100, 8), s1 = sparseRequest(1, "e", 100, 8);
  s1.rowSize = 4;  // inconsistent with its own shape
  const std::string msg = errorOf({s0, s1}, 2);
  EXPECT_NE(msg.find("row size 4 does not match dense shape [100, 8]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
}

TEST(Validation, AllgatherLetsOnlyTheFirstDimensionDiffer) {
  const auto g = [](int rank, TensorShape s) {
    return makeRequest(rank, "g", OpType::kAllgather, DataType::kFloat32, std::move(s));
  };
  const Response ok =
      buildResponse("g", entryOf(3, {g(0, {2, 3}), g(1, {5, 3}), g(2, {0, 3})}), noneJoined(3));
  ASSERT_EQ(ok.type, ResponseType::kAllgather);
  EXPECT_EQ(ok.gatherRows, (std::vector<int64_t>{2, 5, 0}));
  EXPECT_EQ(ok.shapes, std::vector<TensorShape>{TensorShape({7, 3})});
  const std::string msg = errorOf({g(0, {2, 3}), g(1, {2, 4})}, 2);
  EXPECT_NE(msg.find("rank 1 sent shape (all dimensions but the first must match) [2, 4], rank 0 "
                     "[2, 3]"),
            std::string::npos)
      << msg;
  EXPECT_NE(errorOf({g(0, {2, 3}), g(1, {2, 3, 1})}, 2).find("rank 1"), std::string::npos);
}

TEST(Validation, DuplicatePostFailsTheName) {
  TableEntry e = entryOf(2, {makeRequest(0, "x"), makeRequest(1, "x")});
  e.duplicateRanks = {1};
  const Response r = buildResponse("x", e, noneJoined(2));
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_NE(r.errorMessage.find("tensor 'x': rank 1 posted it again"), std::string::npos);
}

TEST(Validation, SparseWithJoinedRanksWorks) {
  std::vector<bool> joined = {false, true, false, true};
  Request q0 = sparseRequest(0, "emb", 1000, 16), q2 = sparseRequest(2, "emb", 1000, 16);
  q0.device = Device::cuda(0);
  q2.device = Device::cuda(2);
  const Response r = buildResponse("emb", entryOf(4, {q0, q2}), joined);
  ASSERT_EQ(r.type, ResponseType::kSparseAllreduce) << r.errorMessage;
  EXPECT_EQ(r.rowSize, 16);
  EXPECT_EQ(r.rowOffsets, std::vector<int64_t>{0});
  EXPECT_EQ(r.totalRows, 1000);
  ASSERT_EQ(r.devices.size(), 4u);
  EXPECT_EQ(r.devices[2], Device::cuda(2));
  EXPECT_EQ(r.devices[1], Device::cuda(0));  // joined: the first poster's

  // Allgather too: joined ranks contribute no rows.
  const auto g = [](int rank, int64_t rows) {
    return makeRequest(rank, "g", OpType::kAllgather, DataType::kInt64, TensorShape({rows, 2}));
  };
  const Response ag = buildResponse("g", entryOf(4, {g(0, 3), g(2, 4)}), joined);
  ASSERT_EQ(ag.type, ResponseType::kAllgather) << ag.errorMessage;
  EXPECT_EQ(ag.gatherRows, (std::vector<int64_t>{3, 0, 4, 0}));
}

TEST(Validation, BroadcastFromAJoinedRootFails) {
  Request b = makeRequest(0, "p", OpType::kBroadcast);
  b.rootRank = 1;
  const Response r = buildResponse("p", entryOf(2, {b}), {false, true});
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.errorMessage,
            "tensor 'p': broadcast root rank 1 has joined and has no tensor to send");
}

TEST(Validation, CheckRequestCatchesMalformedRequestsAtEnqueue) {
  EXPECT_TRUE(checkRequest(sparseRequest(0, "e", 10, 4), 2).isOk());
  Request s = sparseRequest(0, "e", 10, 4);
  s.rowSize = 3;
  EXPECT_FALSE(checkRequest(s, 2).isOk());
  s.shape = TensorShape({});
  EXPECT_FALSE(checkRequest(s, 2).isOk());
  Request b = makeRequest(0, "b", OpType::kBroadcast);
  b.rootRank = 2;
  EXPECT_FALSE(checkRequest(b, 2).isOk());
  EXPECT_FALSE(checkRequest(makeRequest(0, "j", OpType::kJoin), 2).isOk());
  EXPECT_TRUE(checkRequest(makeRequest(0, kJoinTensorName, OpType::kJoin), 2).isOk());
  EXPECT_FALSE(checkRequest(makeRequest(0, ""), 2).isOk());
  EXPECT_FALSE(checkRequest(makeRequest(3, "x"), 2).isOk());
  EXPECT_FALSE(
      checkRequest(makeRequest(0, "g", OpType::kAllgather, DataType::kFloat32, {}), 2).isOk());
  // Sparse allreduce sums or averages only; dense takes every op.
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kAdasum}) {
    Request sp = sparseRequest(0, "e", 10, 4);
    sp.reduceOp = op;
    const Status st = checkRequest(sp, 2);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << reduceOpName(op);
    EXPECT_EQ(st.message(), fmt::format("tensor 'e': sparse allreduce reduces with sum or average, "
                                        "not {} (min, max, product and adasum are for dense "
                                        "tensors)",
                                        reduceOpName(op)));
    Request d = makeRequest(0, "d");
    d.reduceOp = op;
    EXPECT_TRUE(checkRequest(d, 2).isOk()) << reduceOpName(op);
  }
}

TEST(Validation, AdasumOnlyForFloatAllreduceOnPowerOfTwoRanks) {
  for (const DataType dtype :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    Request q = makeRequest(0, "a", OpType::kAllreduce, dtype);
    q.reduceOp = ReduceOp::kAdasum;
    for (int size : {1, 2, 4, 8, 64}) EXPECT_TRUE(checkRequest(q, size).isOk()) << size;
    for (int size : {3, 6, 7}) {
      const Status st = checkRequest(q, size);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(st.message(), fmt::format("tensor 'a': adasum needs a power-of-two number of "
                                          "ranks, this job has {}",
                                          size));
    }
  }
  for (const DataType dtype : {DataType::kInt32, DataType::kInt64}) {
    Request q = makeRequest(0, "i", OpType::kAllreduce, dtype);
    q.reduceOp = ReduceOp::kAdasum;
    EXPECT_EQ(checkRequest(q, 2).message(),
              fmt::format("tensor 'i': adasum needs a floating-point tensor (float16, bfloat16, "
                          "float32 or float64), not {}",
                          dataTypeName(dtype)));
  }
  Request rs = makeRequest(0, "rs", OpType::kReducescatter, DataType::kFloat32, {4});
  rs.reduceOp = ReduceOp::kAdasum;
  EXPECT_EQ(checkRequest(rs, 2).message(),
            "tensor 'rs': reducescatter does not take adasum (it is for dense allreduce)");
  // Ranks that disagree: the op field names both groups, on every rank (one error response).
  Request a = makeRequest(0, "m");
  a.reduceOp = ReduceOp::kAdasum;
  Request b = makeRequest(1, "m");
  const Response r = buildResponse("m", entryOf(2, {a, b}), noneJoined(2));
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.errorMessage, "tensor 'm': rank 1 sent reduce op sum, rank 0 adasum");
}

TEST(Validation, MinMaxProductWhileARankHasJoinedOnEveryDevice) {
  // The executors fill a joined rank's slots with the op's identity (CPU: ops::fillIdentity,
  // CUDA: launchFillIdentity), so negotiation lets these through on every device.
  std::vector<bool> joined = {false, true};
  for (const Device device : {Device::cpu(), Device::cuda(0)}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      Request a = makeRequest(0, "x");
      a.device = device;
      a.reduceOp = op;
      const Response r = buildResponse("x", entryOf(2, {a}), joined);
      EXPECT_EQ(r.type, ResponseType::kAllreduce) << reduceOpName(op) << " " << r.errorMessage;
      EXPECT_EQ(r.reduceOp, op);
    }
  }
}

Request alltoallRequest(int rank,
                        TensorShape shape,
                        std::vector<int64_t> splits = {},
                        DataType dtype = DataType::kFloat32) {
  Request q = makeRequest(rank, "a", OpType::kAlltoall, dtype, std::move(shape));
  q.splits = std::move(splits);
  return q;
}

TEST(Validation, AlltoallCarriesEveryRanksSplits) {
  // Rank 0 splits 3 rows [1, 0, 2], rank 1 gives none (6 rows, equal), rank 2 [0, 0, 0].
  const Response r =
      buildResponse("a",
                    entryOf(3, {alltoallRequest(0, {3, 4}, {1, 0, 2}), alltoallRequest(1, {6, 4}),
                                alltoallRequest(2, {0, 4}, {0, 0, 0})}),
                    noneJoined(3));
  ASSERT_EQ(r.type, ResponseType::kAlltoall) << r.errorMessage;
  EXPECT_EQ(r.splits, (std::vector<int64_t>{1, 0, 2, 2, 2, 2, 0, 0, 0}));
  EXPECT_EQ(r.shapes, std::vector<TensorShape>{TensorShape({9, 4})});
  EXPECT_TRUE(r.gatherRows.empty());
}

TEST(Validation, AlltoallMismatchesFailWithWhoSentWhat) {
  EXPECT_EQ(
      errorOf({alltoallRequest(0, {2, 3}), alltoallRequest(1, {2, 3}, {}, DataType::kInt32)}, 2),
      "tensor 'a': rank 1 sent dtype int32, rank 0 float32");
  EXPECT_EQ(errorOf({alltoallRequest(0, {2, 3}), alltoallRequest(1, {4, 5})}, 2),
            "tensor 'a': rank 1 sent shape (all dimensions but the first must match) [4, 5], "
            "rank 0 [2, 3]");
  EXPECT_EQ(errorOf({alltoallRequest(0, {2, 3}), alltoallRequest(1, {4, 3, 1})}, 2),
            "tensor 'a': rank 1 sent shape (all dimensions but the first must match) [4, 3, 1], "
            "rank 0 [2, 3]");
  // Every rank's split problem, grouped; the ranks whose splits fit are not named.
  EXPECT_EQ(errorOf({alltoallRequest(0, {3, 2}, {1, 2}), alltoallRequest(1, {3, 2}, {1, 1, 1}),
                     alltoallRequest(2, {4, 2}, {1, 1, 1}), alltoallRequest(3, {5, 2})},
                    4),
            "tensor 'a': alltoall splits do not fit: rank 0 sent splits [1, 2] (2 entries) for 4 "
            "ranks; ranks 1-2 sent splits [1, 1, 1] (3 entries) for 4 ranks; rank 3 sent 5 rows, "
            "which do not split equally over 4 ranks (pass splits)");
}

TEST(Validation, AlltoallSplitProblemsAreGroupedByRank) {
  EXPECT_EQ(
      errorOf({alltoallRequest(0, {3, 2}, {1, 2}), alltoallRequest(1, {3, 2}, {1, 2}),
               alltoallRequest(2, {3, 2}, {3})},
              3),
      "tensor 'a': alltoall splits do not fit: ranks 0-1 sent splits [1, 2] (2 entries) for 3 "
      "ranks; rank 2 sent splits [3] (1 entries) for 3 ranks");
  EXPECT_EQ(errorOf({alltoallRequest(0, {4, 2}, {1, 3}), alltoallRequest(1, {4, 2}, {2, 1})}, 2),
            "tensor 'a': alltoall splits do not fit: rank 1 sent splits [2, 1] summing to 3 for a "
            "first dimension of 4");
  EXPECT_EQ(errorOf({alltoallRequest(0, {1, 2}, {2, -1}), alltoallRequest(1, {4, 2}, {2, 2})}, 2),
            "tensor 'a': alltoall splits do not fit: rank 0 sent splits [2, -1] with a negative "
            "entry");
  EXPECT_EQ(errorOf({alltoallRequest(0, {4}), alltoallRequest(1, {5}), alltoallRequest(2, {6})}, 3),
            "tensor 'a': alltoall splits do not fit: rank 0 sent 4 rows, which do not split "
            "equally over 3 ranks (pass splits); rank 1 sent 5 rows, which do not split equally "
            "over 3 ranks (pass splits)");
}

TEST(Validation, AlltoallWhileARankHasJoinedFails) {
  const Response r = buildResponse(
      "a", entryOf(3, {alltoallRequest(0, {3}), alltoallRequest(2, {3})}), {false, true, false});
  ASSERT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.errorMessage,
            "tensor 'a': alltoall while rank 1 has joined is not supported (a joined rank has no "
            "tensor to send or receive)");
}

TEST(Validation, ReducescatterChecksShapeAndOpAndTakesJoinedRanks) {
  const auto rs = [](int rank, TensorShape s, ReduceOp op = ReduceOp::kSum) {
    Request q = makeRequest(rank, "r", OpType::kReducescatter, DataType::kFloat32, std::move(s));
    q.reduceOp = op;
    return q;
  };
  const Response ok = buildResponse("r", entryOf(2, {rs(0, {5, 2}), rs(1, {5, 2})}), noneJoined(2));
  ASSERT_EQ(ok.type, ResponseType::kReducescatter) << ok.errorMessage;
  EXPECT_EQ(ok.shapes, std::vector<TensorShape>{TensorShape({5, 2})});
  EXPECT_EQ(ok.reduceOp, ReduceOp::kSum);
  EXPECT_EQ(errorOf({rs(0, {5, 2}), rs(1, {4, 2})}, 2),
            "tensor 'r': rank 1 sent dense shape [4, 2], rank 0 [5, 2]");
  EXPECT_EQ(errorOf({rs(0, {5, 2}), rs(1, {5, 2}, ReduceOp::kMax)}, 2),
            "tensor 'r': rank 1 sent reduce op max, rank 0 sum");
  // A joined rank contributes the op's identity (the executor's): no error.
  EXPECT_EQ(
      buildResponse("r", entryOf(3, {rs(0, {5, 2}), rs(2, {5, 2})}), {false, true, false}).type,
      ResponseType::kReducescatter);
}

TEST(Validation, CheckRequestTakesSplitsForAlltoallOnly) {
  EXPECT_TRUE(checkRequest(alltoallRequest(0, {3}, {1, 2, 3}), 2).isOk());  // rank 0 judges
  EXPECT_FALSE(checkRequest(alltoallRequest(0, {}), 2).isOk());
  Request q = makeRequest(0, "x");
  q.splits = {1};
  EXPECT_EQ(checkRequest(q, 2).message(), "tensor 'x': splits are for alltoall, not allreduce");
  EXPECT_FALSE(
      checkRequest(makeRequest(0, "r", OpType::kReducescatter, DataType::kFloat32, {}), 2).isOk());
}

TEST(Validation, ScatterRowsFollowHorovod) {
  // 7 rows over 3 ranks: 3, 2, 2 at 0, 3, 5; 2 rows over 4: 1, 1, 0, 0.
  EXPECT_EQ(scatterRows(7, 3, 0), 3);
  EXPECT_EQ(scatterRows(7, 3, 1), 2);
  EXPECT_EQ(scatterRows(7, 3, 2), 2);
  EXPECT_EQ(scatterOffset(7, 3, 1), 3);
  EXPECT_EQ(scatterOffset(7, 3, 2), 5);
  EXPECT_EQ(scatterRows(2, 4, 1), 1);
  EXPECT_EQ(scatterRows(2, 4, 2), 0);
  EXPECT_EQ(scatterOffset(2, 4, 3), 2);
}

}  // namespace
}  // namespace zen::controller
