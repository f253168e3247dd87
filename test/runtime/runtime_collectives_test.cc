// Alltoall and reducescatter end to end through the daemon: in-process ranks {1, 2, 3, 4} over
// every dtype, uneven splits and zero-size pieces, Horovod's uneven reducescatter pieces, every
// reduce op, fused reducescatter buckets, the response cache (and splits that change), a joined
// rank, and mismatches (dtype, trailing shape, splits, shape, op) failing on every rank within
// a bounded time; then forked processes over TCP. Results are checked against references the
// test computes; values are small integers, exact in every dtype.
#include <algorithm>
#include <cmath>
#include <limits>

#include "test/runtime/fork_ranks.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                DataType::kFloat64, DataType::kInt32,   DataType::kInt64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProduct};

// A tensor's bytes written and read as doubles, whatever its dtype.
struct Buffer {
  DataType dtype = DataType::kFloat32;
  TensorShape shape;
  std::vector<std::byte> bytes;

  Buffer(DataType d, TensorShape s)
      : dtype(d),
        shape(std::move(s)),
        bytes(static_cast<size_t>(shape.numElements()) * dataTypeSize(d)) {}
  void set(size_t i, double v) {
    dispatchDataType(dtype, [&](auto tag) {
      using T = decltype(tag);
      reinterpret_cast<T*>(bytes.data())[i] = fromAccumulator<T>(static_cast<AccumulatorT<T>>(v));
    });
  }
  DenseView view() {
    return DenseView{bytes.empty() ? nullptr : bytes.data(), dtype, shape, Device::cpu()};
  }
};

double valueAt(DataType dtype, const void* data, size_t i) {
  return dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(toAccumulator<AccumulatorT<T>>(reinterpret_cast<const T*>(data)[i]));
  });
}

// ---- alltoall ----

// Rank s sends rank d (s + 2d + step) % 4 rows (some empty, its own too) of [2, 3]; element e
// of row k is a small integer naming (s, d, k, e).
int64_t rowsFrom(int s, int d, int step) {
  return (s + 2 * d + step) % 4;
}
double cell(int s, int d, int64_t k, int64_t e) {
  return static_cast<double>((s * 31 + d * 17 + k * 5 + e) % 97) - 48;
}
constexpr int64_t kRowElements = 6;

Buffer alltoallInput(DataType dtype, int me, int n, int step, std::vector<int64_t>* splits) {
  int64_t rows = 0;
  for (int d = 0; d < n; ++d) {
    splits->push_back(rowsFrom(me, d, step));
    rows += splits->back();
  }
  Buffer in(dtype, TensorShape({rows, 2, 3}));
  size_t at = 0;
  for (int d = 0; d < n; ++d) {
    for (int64_t k = 0; k < rowsFrom(me, d, step); ++k) {
      for (int64_t e = 0; e < kRowElements; ++e) in.set(at++, cell(me, d, k, e));
    }
  }
  return in;
}

// What rank me must hold after the alltoall of `step`.
::testing::AssertionResult alltoallMatches(
    const OpResult& out, DataType dtype, int me, int n, int step) {
  int64_t rows = 0;
  for (int s = 0; s < n; ++s) {
    if (out.receivedSplits.size() != static_cast<size_t>(n) ||
        out.receivedSplits[s] != rowsFrom(s, me, step)) {
      return ::testing::AssertionFailure() << "received splits from rank " << s;
    }
    rows += rowsFrom(s, me, step);
  }
  if (out.gatheredShape != TensorShape({rows, 2, 3})) {
    return ::testing::AssertionFailure() << "shape " << out.gatheredShape.toString();
  }
  if (out.gathered.size() != static_cast<size_t>(rows * kRowElements) * dataTypeSize(dtype)) {
    return ::testing::AssertionFailure() << out.gathered.size() << " bytes";
  }
  size_t at = 0;
  for (int s = 0; s < n; ++s) {
    for (int64_t k = 0; k < rowsFrom(s, me, step); ++k) {
      for (int64_t e = 0; e < kRowElements; ++e, ++at) {
        const double got = valueAt(dtype, out.gathered.data(), at);
        if (got != cell(s, me, k, e)) {
          return ::testing::AssertionFailure()
                 << dataTypeName(dtype) << ": row " << k << " from rank " << s << " element " << e
                 << " is " << got << ", want " << cell(s, me, k, e);
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// One step: every dtype's alltoall in one group (alltoalls never fuse: one bucket each).
void alltoallStep(Job& job, int step) {
  const int n = job.size();
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<Buffer> inputs;
    std::vector<TensorOp> ops;
    for (DataType dtype : kDtypes) {
      std::vector<int64_t> splits;
      inputs.push_back(alltoallInput(dtype, r, n, step, &splits));
      ops.push_back(TensorOp::alltoall(fmt::format("a2a.{}", dataTypeName(dtype)),
                                       inputs.back().view(), std::move(splits)));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (size_t i = 0; i < hs.value().size(); ++i) {
      const Handle& h = hs.value()[i];
      ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r;
      EXPECT_TRUE(alltoallMatches(h.result(), kDtypes[i], r, n, step)) << "rank " << r;
    }
  });
}

TEST(RuntimeAlltoall, EveryDtypeUnevenSplitsAndEmptyPiecesOnOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    Job job(n);
    alltoallStep(job, 0);  // negotiated
    std::vector<RuntimeStats> before;
    for (int r = 0; r < n; ++r) before.push_back(job.rank(r).stats());
    alltoallStep(job, 0);  // the same splits: from the response cache
    for (int r = 0; r < n; ++r) {
      const RuntimeStats s = job.rank(r).stats();
      EXPECT_EQ(s.cacheHits - before[r].cacheHits, std::size(kDtypes)) << "rank " << r;
      EXPECT_EQ(s.bucketsExecuted - before[r].bucketsExecuted, std::size(kDtypes));
      EXPECT_EQ(s.tensors.at("a2a.float32").lastScheme, "alltoall");
    }
    alltoallStep(job, 1);  // new splits everywhere: renegotiated, right again
  }
}

TEST(RuntimeAlltoall, ARankThatChangesItsSplitsAloneIsRenegotiated) {
  constexpr int n = 3;
  Job job(n);
  alltoallStep(job, 0);
  alltoallStep(job, 0);
  // Rank 1 alone moves to step 2's splits (its first dimension changes too): the cached plan
  // is stale on rank 1 only, and every rank must still receive what rank 1 now sends.
  job.onEachRank([&](int r, Runtime& rt) {
    const int mine = r == 1 ? 2 : 0;
    std::vector<int64_t> splits;
    Buffer in = alltoallInput(DataType::kInt32, r, n, mine, &splits);
    auto h = rt.enqueue(TensorOp::alltoall("a2a.int32", in.view(), splits));
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
    const OpResult& out = h.value().result();
    size_t at = 0;
    for (int s = 0; s < n; ++s) {
      const int sStep = s == 1 ? 2 : 0;
      ASSERT_EQ(out.receivedSplits[s], rowsFrom(s, r, sStep)) << "rank " << r << " from " << s;
      for (int64_t k = 0; k < rowsFrom(s, r, sStep); ++k) {
        for (int64_t e = 0; e < kRowElements; ++e, ++at) {
          ASSERT_EQ(valueAt(DataType::kInt32, out.gathered.data(), at), cell(s, r, k, e));
        }
      }
    }
  });
}

TEST(RuntimeAlltoall, EqualSplitWithoutSplitsAndAnEmptyTensor) {
  for (int n = 1; n <= 4; ++n) {
    Job job(n);
    job.onEachRank([&](int r, Runtime& rt) {
      Buffer even(DataType::kInt64, TensorShape({2 * n}));
      for (int64_t i = 0; i < 2 * n; ++i) even.set(static_cast<size_t>(i), r * 100 + i);
      Buffer empty(DataType::kFloat32, TensorShape({0, 4}));
      auto hs =
          rt.enqueueGroup({TensorOp::alltoall("even", even.view()),
                           TensorOp::alltoall("empty", empty.view(), std::vector<int64_t>(n, 0))});
      ASSERT_TRUE(hs.isOk()) << hs.status().toString();
      for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk());
      const OpResult& got = hs.value()[0].result();
      EXPECT_EQ(got.receivedSplits, std::vector<int64_t>(n, 2));
      EXPECT_EQ(got.gatheredShape, TensorShape({2 * n}));
      // Rank s sent rows 2r and 2r + 1 of its own here.
      for (int s = 0; s < n; ++s) {
        for (int k = 0; k < 2; ++k) {
          EXPECT_EQ(valueAt(DataType::kInt64, got.gathered.data(), 2 * s + k), s * 100 + 2 * r + k);
        }
      }
      EXPECT_EQ(hs.value()[1].result().gatheredShape, TensorShape({0, 4}));
      EXPECT_TRUE(hs.value()[1].result().gathered.empty());
    });
  }
}

// ---- reducescatter ----

// Rank r's element g for op: as in the transport tests (sums of small integers, [-5, 5] for
// min and max, signed powers of two for products), times n for Average so the mean is exact.
double scatterValue(ReduceOp op, int r, int64_t g, int n, bool integral) {
  const auto i = static_cast<size_t>(g);
  switch (op) {
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<double>((i * 7 + static_cast<size_t>(r) * 5) % 11) - 5;
    case ReduceOp::kProduct: {
      static constexpr double kFactors[] = {1, -1, 2, -2, 0.5, 1};
      const double f = kFactors[(i + static_cast<size_t>(r) * 2) % 6];
      return integral && f == 0.5 ? -1 : f;
    }
    case ReduceOp::kAverage:
      return n * ((r + 1) * (static_cast<double>(i % 13) - 6));
    default:
      return (r + 1) * (static_cast<double>(i % 13) - 6);
  }
}

bool integralType(DataType dtype) {
  return dtype == DataType::kInt32 || dtype == DataType::kInt64;
}

// An average as the executors compute it (and Horovod): the sum, rounded to the dtype, times
// 1/n in its accumulator type (integers: the quotient), rounded to the dtype.
double averaged(DataType dtype, double sum, int n) {
  return dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    if constexpr (std::is_integral_v<T>) {
      return static_cast<double>(static_cast<Acc>(sum) / n);
    } else {
      const Acc rounded = toAccumulator<Acc>(fromAccumulator<T>(static_cast<Acc>(sum)));
      return static_cast<double>(
          toAccumulator<Acc>(fromAccumulator<T>(rounded * static_cast<Acc>(1.0 / n))));
    }
  });
}

// The reduction over `ranks` (the identity when there are none) in `dtype`.
double scatterReference(
    ReduceOp op, const std::vector<int>& ranks, int64_t g, int n, DataType dtype) {
  const bool integral = integralType(dtype);
  double acc = op == ReduceOp::kProduct ? 1.0 : 0.0;
  if (op == ReduceOp::kMin) acc = std::numeric_limits<double>::infinity();
  if (op == ReduceOp::kMax) acc = -std::numeric_limits<double>::infinity();
  for (int r : ranks) {
    const double v = scatterValue(op, r, g, n, integral);
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    if (op == ReduceOp::kMax) acc = std::max(acc, v);
    if (op == ReduceOp::kProduct) acc *= v;
    if (op == ReduceOp::kSum || op == ReduceOp::kAverage) acc += v;
  }
  return op == ReduceOp::kAverage ? averaged(dtype, acc, n) : acc;
}

// Every dtype's reducescatter of `rows` x 3 with `op` on the ranks `posters` (the others have
// joined), one group; checks each poster's piece.
void reducescatterStep(Job& job,
                       ReduceOp op,
                       int64_t rows,
                       const std::vector<int>& posters,
                       const std::string& prefix = "rs") {
  const int n = job.size();
  job.onEachRank([&](int r, Runtime& rt) {
    if (std::find(posters.begin(), posters.end(), r) == posters.end()) return;
    std::vector<Buffer> inputs, outputs;
    std::vector<TensorOp> ops;
    for (DataType dtype : kDtypes) {
      inputs.emplace_back(dtype, TensorShape({rows, 3}));
      for (int64_t g = 0; g < rows * 3; ++g) {
        inputs.back().set(static_cast<size_t>(g), scatterValue(op, r, g, n, integralType(dtype)));
      }
      outputs.emplace_back(dtype, TensorShape({scatterRows(rows, n, r), 3}));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      ops.push_back(TensorOp::reducescatter(
          fmt::format("{}.{}.{}.{}", prefix, reduceOpName(op), rows, dataTypeName(kDtypes[i])),
          inputs[i].view(), outputs[i].view(), op));
    }
    auto hs = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(hs.isOk()) << hs.status().toString();
    for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "rank " << r;
    const int64_t first = scatterOffset(rows, n, r) * 3;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const DataType dtype = kDtypes[i];
      for (int64_t e = 0; e < outputs[i].shape.numElements(); ++e) {
        ASSERT_EQ(valueAt(dtype, outputs[i].bytes.data(), static_cast<size_t>(e)),
                  scatterReference(op, posters, first + e, n, dtype))
            << dataTypeName(dtype) << " " << reduceOpName(op) << " " << rows << " rows, rank " << r
            << " element " << e;
      }
    }
  });
}

std::vector<int> allRanks(int n) {
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
  return ranks;
}

TEST(RuntimeReducescatter, EveryDtypeAndOpWithUnevenAndEmptyPiecesOnOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    Job job(n);
    for (ReduceOp op : kOps) {
      // 2n + 1 rows: the first rank gets one row more; n - 1 rows: the last rank gets none;
      // 0 rows: nobody gets any.
      for (int64_t rows : {int64_t{2 * n + 1}, int64_t{n - 1}, int64_t{0}}) {
        reducescatterStep(job, op, rows, allRanks(n));
      }
    }
  }
}

TEST(RuntimeReducescatter, ATensorGroupFusesIntoOneBucketAndHitsTheCache) {
  constexpr int n = 3;
  constexpr int kTensors = 8;
  Job job(n);
  auto step = [&](int s) {
    job.onEachRank([&](int r, Runtime& rt) {
      std::vector<std::vector<float>> in, out;
      std::vector<TensorOp> ops;
      for (int k = 0; k < kTensors; ++k) {
        const int64_t rows = 2 + k;  // uneven pieces on every tensor but k = 1, 4, 7
        in.emplace_back(static_cast<size_t>(rows * 2));
        for (size_t e = 0; e < in.back().size(); ++e) {
          in.back()[e] = static_cast<float>((r + 1) * (k + 1) + static_cast<int>(e) + s);
        }
        out.emplace_back(static_cast<size_t>(scatterRows(rows, n, r) * 2), -1.0f);
      }
      for (int k = 0; k < kTensors; ++k) {
        const int64_t rows = 2 + k;
        ops.push_back(TensorOp::reducescatter(
            fmt::format("fused.{}", k), denseView(in[k], {rows, 2}),
            denseView(out[k], {scatterRows(rows, n, r), 2}), ReduceOp::kSum));
      }
      auto hs = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(hs.isOk()) << hs.status().toString();
      for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk());
      for (int k = 0; k < kTensors; ++k) {
        const int64_t first = scatterOffset(2 + k, n, r) * 2;
        for (size_t e = 0; e < out[k].size(); ++e) {
          float want = 0;
          for (int p = 0; p < n; ++p) {
            want += static_cast<float>((p + 1) * (k + 1) + static_cast<int>(first + e) + s);
          }
          ASSERT_EQ(out[k][e], want) << "tensor " << k << " element " << e << " rank " << r;
        }
      }
    });
  };
  step(0);
  std::vector<RuntimeStats> before;
  for (int r = 0; r < n; ++r) before.push_back(job.rank(r).stats());
  step(1);
  for (int r = 0; r < n; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    EXPECT_EQ(s.bucketsExecuted - before[r].bucketsExecuted, 1u) << "rank " << r;
    EXPECT_EQ(s.cacheHits - before[r].cacheHits, uint64_t(kTensors)) << "rank " << r;
    EXPECT_EQ(s.tensors.at("fused.5").lastBucketSize, size_t(kTensors));
    EXPECT_EQ(s.tensors.at("fused.5").lastScheme, "reducescatter");
  }
}

TEST(RuntimeReducescatter, AJoinedRankContributesTheIdentity) {
  constexpr int n = 4;
  constexpr int kJoiner = 2;
  for (ReduceOp op : kOps) {
    Job job(n);
    const Handle join = stepWithJoinedRank(job, kJoiner, [&](const std::vector<int>& posters) {
      reducescatterStep(job, op, 2 * n + 1, posters, "joined");
    });
    ASSERT_TRUE(waitFor(join).isOk());
  }
}

// ---- errors ----

// Every rank's handle fails with kInvalidArgument and a message holding `needle`, well within
// the bound (negotiation, not a timeout, ends it).
void expectFailsEverywhere(Job& job,
                           const std::function<TensorOp(int rank, std::vector<Buffer>*)>& make,
                           const std::string& needle) {
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<Buffer> keep;
    keep.reserve(4);
    auto h = rt.enqueue(make(r, &keep));
    ASSERT_TRUE(h.isOk()) << "rank " << r << ": refused at enqueue: " << h.status().toString();
    const auto start = std::chrono::steady_clock::now();
    const Status s = waitFor(h.value(), 15 * kSlowdown);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << s.toString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << "rank " << r << ": " << s.message();
    EXPECT_LT(took, 10 * kSlowdown) << "rank " << r;  // half the 20 s timeout
  });
}

TEST(RuntimeCollectiveErrors, AlltoallMismatchesFailOnEveryRank) {
  constexpr int n = 3;
  Job job(n);
  auto a2a = [](std::string name, DataType dtype, TensorShape shape, std::vector<int64_t> splits,
                std::vector<Buffer>* keep) {
    keep->emplace_back(dtype, std::move(shape));
    return TensorOp::alltoall(std::move(name), keep->back().view(), std::move(splits));
  };
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return a2a("bad.dtype", r == 1 ? DataType::kInt32 : DataType::kFloat32, {3, 2}, {}, keep);
      },
      "tensor 'bad.dtype': rank 1 sent dtype int32, ranks 0, 2 float32");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return a2a("bad.trailing", DataType::kFloat32, {3, r == 2 ? 4 : 2}, {}, keep);
      },
      "tensor 'bad.trailing': rank 2 sent shape (all dimensions but the first must match) [3, "
      "4], ranks 0-1 [3, 2]");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        std::vector<int64_t> splits = {1, 1, 1};
        if (r == 0) splits = {2, 1};
        return a2a("bad.length", DataType::kFloat32, {3}, splits, keep);
      },
      "tensor 'bad.length': alltoall splits do not fit: rank 0 sent splits [2, 1] (2 entries) "
      "for 3 ranks");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return a2a("bad.sum", DataType::kFloat32, {4},
                   r == 2 ? std::vector<int64_t>{1, 1, 1} : std::vector<int64_t>{2, 1, 1}, keep);
      },
      "rank 2 sent splits [1, 1, 1] summing to 3 for a first dimension of 4");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return a2a("bad.equal", DataType::kFloat32, {r == 1 ? 4 : 3}, {}, keep);
      },
      "rank 1 sent 4 rows, which do not split equally over 3 ranks (pass splits)");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return a2a("bad.negative", DataType::kFloat32, {3},
                   r == 0 ? std::vector<int64_t>{4, -1, 0} : std::vector<int64_t>{1, 1, 1}, keep);
      },
      "rank 0 sent splits [4, -1, 0] with a negative entry");
  // The daemon goes on.
  alltoallStep(job, 3);
}

TEST(RuntimeCollectiveErrors, ReducescatterMismatchesFailOnEveryRank) {
  constexpr int n = 3;
  Job job(n);
  auto rs = [](std::string name, int r, TensorShape shape, ReduceOp op, std::vector<Buffer>* keep) {
    std::vector<int64_t> piece = shape.dims();
    piece[0] = scatterRows(piece[0], 3, r);
    keep->emplace_back(DataType::kFloat32, shape);
    keep->emplace_back(DataType::kFloat32, TensorShape(piece));
    return TensorOp::reducescatter(std::move(name), (*keep)[0].view(), (*keep)[1].view(), op);
  };
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return rs("bad.shape", r, {r == 0 ? 5 : 4, 2}, ReduceOp::kSum, keep);
      },
      "tensor 'bad.shape': ranks 1-2 sent dense shape [4, 2], rank 0 [5, 2]");
  expectFailsEverywhere(
      job,
      [&](int r, std::vector<Buffer>* keep) {
        return rs("bad.op", r, {4, 2}, r == 2 ? ReduceOp::kMax : ReduceOp::kSum, keep);
      },
      "tensor 'bad.op': rank 2 sent reduce op max, ranks 0-1 sum");
  // An output that is not this rank's piece is refused at enqueue, on that rank.
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<float> in(10), out(10);
    auto h = rt.enqueue(TensorOp::reducescatter("bad.out", denseView(in, {5, 2}),
                                                denseView(out, {5, 2}), ReduceOp::kSum));
    ASSERT_FALSE(h.isOk());
    EXPECT_NE(h.status().message().find(fmt::format("does not match rank {}'s piece", r)),
              std::string::npos)
        << h.status().message();
  });
  reducescatterStep(job, ReduceOp::kSum, 7, allRanks(n), "after");
}

TEST(RuntimeCollectiveErrors, AlltoallWithAJoinedRankFailsOnTheOthers) {
  constexpr int n = 3;
  Job job(n);
  Handle join;
  job.onEachRank([&](int r, Runtime& rt) {
    if (r != 0) return;
    auto h = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(h.isOk());
    join = h.value();
  });
  job.onEachRank([&](int r, Runtime& rt) {
    if (r == 0) return;
    std::vector<float> x(3);
    auto h = rt.enqueue(TensorOp::alltoall("a2a.joined", denseView(x, {3})));
    ASSERT_TRUE(h.isOk());
    const Status s = waitFor(h.value(), 15 * kSlowdown);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("alltoall while rank 0 has joined is not supported"),
              std::string::npos)
        << s.message();
    auto j = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(j.isOk());
    EXPECT_TRUE(waitFor(j.value()).isOk());
  });
  EXPECT_TRUE(waitFor(join).isOk());
}

// ---- forked processes over TCP ----

// Both collectives for several steps in real processes (TCP control and data planes); a
// nonzero exit code names the first failed check.
int tcpSteps(Runtime& rt) {
  const int n = rt.size();
  const int r = rt.rank();
  for (int step = 0; step < 6; ++step) {
    std::vector<int64_t> splits;
    Buffer a = alltoallInput(DataType::kBFloat16, r, n, step, &splits);
    const int64_t rows = 2 * n + 1;
    Buffer in(DataType::kFloat64, TensorShape({rows, 3}));
    for (int64_t g = 0; g < rows * 3; ++g) {
      in.set(static_cast<size_t>(g), scatterValue(ReduceOp::kAverage, r, g, n, false));
    }
    Buffer out(DataType::kFloat64, TensorShape({scatterRows(rows, n, r), 3}));
    auto hs = rt.enqueueGroup(
        {TensorOp::alltoall("tcp.a2a", a.view(), splits),
         TensorOp::reducescatter("tcp.rs", in.view(), out.view(), ReduceOp::kAverage)});
    if (!hs.isOk()) return 20;
    for (const Handle& h : hs.value()) {
      if (!h.wait(kWaitSeconds).isOk()) return 21;
    }
    if (!alltoallMatches(hs.value()[0].result(), DataType::kBFloat16, r, n, step)) return 22;
    const int64_t first = scatterOffset(rows, n, r) * 3;
    for (int64_t e = 0; e < out.shape.numElements(); ++e) {
      if (valueAt(DataType::kFloat64, out.bytes.data(), static_cast<size_t>(e)) !=
          scatterReference(ReduceOp::kAverage, allRanks(n), first + e, n, DataType::kFloat64)) {
        return 23;
      }
    }
  }
  const Status st = rt.shutdown();
  return st.isOk() || st.message().find("at user request") != std::string::npos ? 0 : 24;
}

TEST(RuntimeCollectivesTcp, ForkedRanksRunAlltoallAndReducescatter) {
  for (int n : {2, 4}) {
    const auto ends = forkRuntimeRanks(n, {{"ZEN_TIMEOUT", "20"}}, 120 * kSlowdown, tcpSteps);
    ASSERT_EQ(ends.size(), static_cast<size_t>(n));
    for (size_t r = 0; r < ends.size(); ++r) {
      EXPECT_EQ(ends[r].exitCode, 0) << n << " ranks, rank " << r;
    }
  }
}

}  // namespace
}  // namespace zen::testing
