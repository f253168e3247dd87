// NcclComm on the device: one rank in-process, and one rank per GPU when there are several.
// Every collective against values computed on the host; receive buffers poisoned first.
#include "cuda/nccl_comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "test/gpu/gpu_ranks.h"
#include "test/gpu/gpu_test_util.h"

namespace zen::cuda::testing {
namespace {

// Byte i of the segment rank `from` sends to rank `to` in test `salt`.
uint8_t patternByte(uint64_t salt, int from, int to, size_t i) {
  return static_cast<uint8_t>((salt * 131 + from * 31 + to * 17 + i * 7) & 0xff);
}

// Segment size from rank `from` to rank `to`: zero for some pairs, odd sizes, one large.
size_t segmentSize(uint64_t salt, int from, int to) {
  const uint64_t h = (salt ^ (from * 0x9e3779b97f4a7c15ull) ^ (to * 0xc2b2ae3d27d4eb4full)) % 7;
  if (h == 0) return 0;
  if (h == 1) return (1 << 20) + 3;
  return static_cast<size_t>(h * 37 + from);
}

TEST(NcclCommGpu, InitIsLazyAndIdempotent) {
  for (int n : testRankCounts()) {
    runRanks(n, [&](RankContext& c) {
      EXPECT_FALSE(c.comm->ready());
      EXPECT_OK(c.comm->init());
      EXPECT_TRUE(c.comm->ready());
      EXPECT_OK(c.comm->init());
      EXPECT_EQ(c.comm->rank(), c.rank);
      EXPECT_EQ(c.comm->size(), n);
    });
  }
}

TEST(NcclCommGpu, CountsThenAlltoallv) {
  const uint64_t salt = testSeed();
  for (int n : testRankCounts()) {
    runRanks(n, [&](RankContext& c) {
      const int r = c.rank;
      std::vector<uint64_t> sendCounts(n);
      for (int p = 0; p < n; ++p) sendCounts[p] = segmentSize(salt, r, p);
      std::vector<uint64_t> recvCounts;
      EXPECT_OK(c.comm->exchangeCounts(sendCounts, &recvCounts, c.stream));
      ASSERT_EQ(recvCounts.size(), static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) EXPECT_EQ(recvCounts[p], segmentSize(salt, p, r)) << p;

      std::vector<DeviceBuffer> sendBufs(n), recvBufs(n);
      std::vector<DeviceBytes> sends(n);
      std::vector<DeviceMutableBytes> recvs(n);
      for (int p = 0; p < n; ++p) {
        std::vector<uint8_t> bytes(sendCounts[p]);
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = patternByte(salt, r, p, i);
        EXPECT_OK(upload(bytes, &sendBufs[p]));
        EXPECT_OK(recvBufs[p].reserve(recvCounts[p] + 1));
        ASSERT_CUDA(cudaMemset(recvBufs[p].data(), kPoisonValueByte, recvCounts[p] + 1));
        sends[p] = {sendCounts[p] ? sendBufs[p].data() : nullptr, sendCounts[p]};
        recvs[p] = {recvCounts[p] ? recvBufs[p].data() : nullptr, recvCounts[p]};
      }
      EXPECT_OK(c.comm->alltoallv(sends, recvs, c.stream));
      EXPECT_OK(c.comm->wait(c.stream, "test alltoallv"));
      for (int p = 0; p < n; ++p) {
        const auto got = download<uint8_t>(recvBufs[p].data(), recvCounts[p] + 1);
        size_t bad = 0;
        for (size_t i = 0; i < recvCounts[p]; ++i) bad += got[i] != patternByte(salt, p, r, i);
        EXPECT_EQ(bad, 0u) << "segment from rank " << p;
        EXPECT_EQ(got[recvCounts[p]], kPoisonValueByte) << "wrote past the segment from " << p;
      }
      const ops::TransportCounters counters = c.comm->counters();
      for (int p = 0; p < n; ++p) {
        EXPECT_EQ(counters.bytesSent[p], p == r ? 0 : sendCounts[p]);
        EXPECT_EQ(counters.bytesReceived[p], p == r ? 0 : recvCounts[p]);
      }
    });
  }
}

TEST(NcclCommGpu, AllgatherCountsAndAllgatherv) {
  const uint64_t salt = testSeed();
  for (int n : testRankCounts()) {
    runRanks(n, [&](RankContext& c) {
      const int r = c.rank;
      const size_t mine = segmentSize(salt, r, r);
      std::vector<uint64_t> sizes;
      EXPECT_OK(c.comm->allgatherCounts(mine, &sizes, c.stream));
      ASSERT_EQ(sizes.size(), static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) EXPECT_EQ(sizes[p], segmentSize(salt, p, p));

      std::vector<uint8_t> bytes(mine);
      for (size_t i = 0; i < mine; ++i) bytes[i] = patternByte(salt, r, 0, i);
      DeviceBuffer send;
      EXPECT_OK(upload(bytes, &send));
      size_t total = 0;
      for (uint64_t s : sizes) total += s;
      DeviceBuffer recv;
      EXPECT_OK(recv.reserve(total + 1));
      ASSERT_CUDA(cudaMemset(recv.data(), kPoisonValueByte, total + 1));
      std::vector<DeviceMutableBytes> recvs(n);
      size_t off = 0;
      for (int p = 0; p < n; ++p) {
        recvs[p] = {recv.as<uint8_t>() + off, sizes[p]};
        off += sizes[p];
      }
      EXPECT_OK(c.comm->allgatherv(mine ? send.data() : nullptr, mine, recvs, c.stream));
      EXPECT_OK(c.comm->wait(c.stream, "test allgatherv"));
      const auto got = download<uint8_t>(recv.data(), total + 1);
      off = 0;
      for (int p = 0; p < n; ++p) {
        size_t bad = 0;
        for (size_t i = 0; i < sizes[p]; ++i) bad += got[off + i] != patternByte(salt, p, 0, i);
        EXPECT_EQ(bad, 0u) << "part of rank " << p;
        off += sizes[p];
      }
      EXPECT_EQ(got[total], kPoisonValueByte);
    });
  }
}

// Element i of rank r's allreduce input: small integers, exact in every dtype after a sum.
double allreduceInput(uint64_t salt, int r, size_t i) {
  return static_cast<double>(static_cast<int>((salt + i * 13 + r * 5) % 17) - 8);
}

// A product's input: signed powers of two up to 2, so that any order of multiplication over up
// to 8 ranks is exact in every dtype, fp16 and bf16 included.
double productInput(uint64_t salt, int r, size_t i) {
  static constexpr double kFactors[] = {1, -1, 2, -2};
  return kFactors[(salt + i * 7 + static_cast<size_t>(r) * 3) % 4];
}

// What NcclComm reduces: every dtype, every op but Adasum (no NCCL op).
constexpr DataType kEveryDtype[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                    DataType::kFloat64, DataType::kInt32,   DataType::kInt64};
constexpr ReduceOp kEveryNcclOp[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                     ReduceOp::kMax, ReduceOp::kProduct};

// Element i of rank r's input to a reduction with op.
double reduceInput(uint64_t salt, ReduceOp op, int r, size_t i) {
  return op == ReduceOp::kProduct ? productInput(salt, r, i) : allreduceInput(salt, r, i);
}

// Rank r's `count` elements of dtype for a reduction with op.
std::vector<uint8_t> reduceInputBytes(
    uint64_t salt, ReduceOp op, DataType dtype, int r, size_t count) {
  const size_t es = dataTypeSize(dtype);
  std::vector<uint8_t> host(count * es);
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < count; ++i) {
      const T v = fromAccumulator<T, AccumulatorT<T>>(
          static_cast<AccumulatorT<T>>(reduceInput(salt, op, r, i)));
      std::memcpy(host.data() + i * es, &v, es);
    }
  });
  return host;
}

// How many of got's elements differ from op over n ranks' inputs, element k of got being
// element first + k of the inputs; the first three are reported with `what`. Exact but for
// float averages.
size_t wrongReductions(const std::vector<uint8_t>& got,
                       size_t first,
                       uint64_t salt,
                       ReduceOp op,
                       DataType dtype,
                       int n,
                       const std::string& what) {
  const size_t es = dataTypeSize(dtype);
  size_t bad = 0;
  dispatchDataType(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccumulatorT<T>;
    const bool integer = dtype == DataType::kInt32 || dtype == DataType::kInt64;
    for (size_t k = 0; k < got.size() / es; ++k) {
      double sum = 0, lo = 1e300, hi = -1e300, prod = 1;
      for (int p = 0; p < n; ++p) {
        const double x = reduceInput(salt, op, p, first + k);
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        prod *= x;
      }
      double want = sum;
      if (op == ReduceOp::kAverage) {
        want = integer ? static_cast<double>(static_cast<int64_t>(sum) / n) : sum / n;
      }
      if (op == ReduceOp::kMin) want = lo;
      if (op == ReduceOp::kMax) want = hi;
      if (op == ReduceOp::kProduct) want = prod;
      T v;
      std::memcpy(&v, got.data() + k * es, es);
      const double have = static_cast<double>(toAccumulator<Acc>(v));
      const double tol = (op != ReduceOp::kAverage || integer) ? 0.0
                         : (dtype == DataType::kBFloat16)      ? 0.02 * std::abs(want) + 1e-2
                         : (dtype == DataType::kFloat16)       ? 2e-3 * std::abs(want) + 1e-3
                                                               : 1e-6 * std::abs(want) + 1e-6;
      if (std::abs(have - want) > tol && bad++ < 3) {
        ADD_FAILURE() << what << " element " << k << ": got " << have << ", want " << want;
      }
    }
  });
  return bad;
}

std::string reductionName(DataType dtype, ReduceOp op, int n) {
  return std::string(dataTypeName(dtype)) + " " + reduceOpName(op) + " n=" + std::to_string(n);
}

// Every ReduceOp (ncclSum/Avg/Min/Max/Prod); min, max and product exact.
TEST(NcclCommGpu, AllreduceEveryDtypeAndOp) {
  const uint64_t salt = testSeed();
  const size_t count = 100003;
  for (int n : testRankCounts()) {
    for (DataType dtype : kEveryDtype) {
      for (ReduceOp op : kEveryNcclOp) {
        runRanks(n, [&](RankContext& c) {
          const size_t es = dataTypeSize(dtype);
          DeviceBuffer buf;
          EXPECT_OK(upload(reduceInputBytes(salt, op, dtype, c.rank, count), &buf));
          EXPECT_OK(c.comm->allreduce(buf.data(), count, dtype, op, c.stream));
          EXPECT_OK(c.comm->wait(c.stream, "test allreduce"));
          const auto got = download<uint8_t>(buf.data(), count * es);
          EXPECT_EQ(wrongReductions(got, 0, salt, op, dtype, n, reductionName(dtype, op, n)), 0u);
        });
      }
    }
  }
}

// Every ReduceOp and dtype over equal blocks, out of place and in place (recv = the own block
// of send); block p of every rank, reduced, lands in rank p; the byte counters count the ring.
TEST(NcclCommGpu, ReducescatterEveryDtypeAndOp) {
  const uint64_t salt = testSeed();
  const size_t perRank = 10007;
  for (int n : testRankCounts()) {
    for (DataType dtype : kEveryDtype) {
      for (ReduceOp op : kEveryNcclOp) {
        runRanks(n, [&](RankContext& c) {
          for (bool inPlace : {false, true}) {
            const size_t es = dataTypeSize(dtype);
            const size_t count = perRank * static_cast<size_t>(n);
            DeviceBuffer send, out;
            EXPECT_OK(upload(reduceInputBytes(salt, op, dtype, c.rank, count), &send));
            EXPECT_OK(out.reserve(perRank * es + 1));
            ASSERT_CUDA(cudaMemset(out.data(), kPoisonValueByte, perRank * es + 1));
            void* recv = inPlace ? send.as<uint8_t>() + static_cast<size_t>(c.rank) * perRank * es
                                 : out.data();
            c.comm->resetCounters();
            EXPECT_OK(c.comm->reducescatter(send.data(), recv, perRank, dtype, op, c.stream));
            EXPECT_OK(c.comm->wait(c.stream, "test reducescatter"));
            const auto got = download<uint8_t>(recv, perRank * es);
            if (!inPlace) {
              EXPECT_EQ(download<uint8_t>(out.as<uint8_t>() + perRank * es, 1)[0],
                        kPoisonValueByte);
            }
            const std::string what = reductionName(dtype, op, n) + (inPlace ? " in place" : "") +
                                     " rank " + std::to_string(c.rank);
            EXPECT_EQ(wrongReductions(got, static_cast<size_t>(c.rank) * perRank, salt, op, dtype,
                                      n, what),
                      0u);
            const ops::TransportCounters counters = c.comm->counters();
            const uint64_t ring = static_cast<uint64_t>(n - 1) * perRank * es;
            EXPECT_EQ(counters.totalSent(), ring);
            EXPECT_EQ(counters.totalReceived(), ring);
          }
        });
      }
    }
  }
}

TEST(NcclCommGpu, BroadcastFromEveryRoot) {
  const uint64_t salt = testSeed();
  for (int n : testRankCounts()) {
    for (int root = 0; root < n; ++root) {
      runRanks(n, [&](RankContext& c) {
        const size_t bytes = 4099;
        std::vector<uint8_t> host(bytes);
        for (size_t i = 0; i < bytes; ++i) {
          host[i] = c.rank == root ? patternByte(salt, root, 1, i) : kPoisonValueByte;
        }
        DeviceBuffer buf;
        EXPECT_OK(upload(host, &buf));
        EXPECT_OK(c.comm->broadcast(buf.data(), bytes, root, c.stream));
        EXPECT_OK(c.comm->wait(c.stream, "test broadcast"));
        const auto got = download<uint8_t>(buf.data(), bytes);
        size_t bad = 0;
        for (size_t i = 0; i < bytes; ++i) bad += got[i] != patternByte(salt, root, 1, i);
        EXPECT_EQ(bad, 0u) << "root " << root << " rank " << c.rank;
      });
    }
  }
}

TEST(NcclCommGpu, ArgumentErrorsLeaveTheCommUsable) {
  runRanks(1, [&](RankContext& c) {
    std::vector<DeviceBytes> sends(2);
    std::vector<DeviceMutableBytes> recvs(1);
    EXPECT_EQ(c.comm->alltoallv(sends, recvs, c.stream).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.comm->broadcast(nullptr, 4, 3, c.stream).code(), StatusCode::kInvalidArgument);
    std::vector<uint64_t> counts;
    EXPECT_OK(c.comm->allgatherCounts(42, &counts, c.stream));
    EXPECT_EQ(counts, std::vector<uint64_t>{42});
  });
}

TEST(NcclCommGpu, RequestAbortEndsTheCommOnItsNextCall) {
  runRanks(1, [&](RankContext& c) {
    EXPECT_OK(c.comm->init());
    c.comm->requestAbort(ZEN_ERROR(StatusCode::kTimeout, "finalizer gave up"));
    std::vector<uint64_t> counts;
    const Status s = c.comm->allgatherCounts(1, &counts, c.stream);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
    EXPECT_NE(s.message().find("finalizer gave up"), std::string::npos) << s.message();
    EXPECT_FALSE(c.comm->ready());
    EXPECT_EQ(c.comm->allgatherCounts(1, &counts, c.stream).code(), StatusCode::kAborted);
  });
}

// The driving thread's abort (after a kernel's own stream wait timed out): at once, and the
// first reason stays.
TEST(NcclCommGpu, AbortEndsTheCommAtOnce) {
  runRanks(1, [&](RankContext& c) {
    EXPECT_OK(c.comm->init());
    c.comm->abort(ZEN_ERROR(StatusCode::kTimeout, "the count's read-back timed out"));
    EXPECT_FALSE(c.comm->ready());
    c.comm->abort(ZEN_ERROR(StatusCode::kInternal, "a later reason"));  // a no-op
    std::vector<uint64_t> counts;
    const Status s = c.comm->allgatherCounts(1, &counts, c.stream);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
    EXPECT_NE(s.message().find("the count's read-back timed out"), std::string::npos)
        << s.message();
    EXPECT_EQ(s.message().find("a later reason"), std::string::npos) << s.message();
  });
}

// Rank 0 waits for a collective its peers never join: a bounded kTimeout naming rank and call,
// the comm aborted, later calls kAborted. Needs two GPUs.
TEST(NcclCommGpu, AMissingPeerIsATimeoutNotAHang) {
  const int n = std::min(deviceCount(), 8);
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  runRanks(
      n,
      [&](RankContext& c) {
        EXPECT_OK(c.comm->init());
        if (c.rank != 0) return;  // the peers skip the collective and destroy their comms
        std::vector<uint64_t> counts;
        const Status s = c.comm->allgatherCounts(7, &counts, c.stream);
        EXPECT_TRUE(s.code() == StatusCode::kTimeout || s.code() == StatusCode::kIoError)
            << s.toString();
        EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.message();
        EXPECT_EQ(c.comm->allgatherCounts(7, &counts, c.stream).code(), StatusCode::kAborted);
      },
      3.0);
}

}  // namespace
}  // namespace zen::cuda::testing
