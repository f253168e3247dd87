// The Transport contract, written once and instantiated per backend (tensorpipe's pattern):
// transport_local_test.cc runs it for in-process and TCP ranks as threads, mpi_test_main.cc
// under mpirun. Results are checked in closed form from (sender, receiver, index), and the
// byte counters against the sizes the test chose.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/float16.h"
#include "ops/reduce.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

ByteVector pattern(int from, int to, size_t bytes) {
  ByteVector v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = patternByte(from, to, i);
  return v;
}

// Sizes that cover empty, tiny, odd and multi-MB messages without slowing the suite.
size_t pairBytes(int from, int to, int n) {
  if (from == 0 && to == n - 1) return size_t{3} << 20;
  if (to == 0 && from == n - 1) return (size_t{2} << 20) + 3;
  static constexpr size_t kSizes[] = {0, 1, 17, 4096, 100003, 0, 555};
  return kSizes[(from * 3 + to * 5) % 7];
}

TEST_P(TransportTest, RankAndSize) {
  run([&](Transport& t) {
    if (GetParam().ranks > 0) {
      EXPECT_EQ(t.size(), GetParam().ranks);
    }
    EXPECT_GE(t.rank(), 0);
    EXPECT_LT(t.rank(), t.size());
    EXPECT_FALSE(std::string(t.backendName()).empty());
  });
}

// Every ordered pair exchanges one message, pairs taken in one global order (lower rank
// sends first) so that blocking sends cannot deadlock on any backend.
TEST_P(TransportTest, SendRecvEveryPairIncludingEmptyMessages) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    t.resetCounters();
    std::vector<uint64_t> sent(n, 0), received(n, 0);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (me != a && me != b) continue;
        const int other = me == a ? b : a;
        const size_t out = pairBytes(me, other, n) % 70000;  // keep pairs small here
        const size_t in = pairBytes(other, me, n) % 70000;
        const ByteVector message = pattern(me, other, out);
        ByteVector got(in, 0xee);
        const uint32_t tag = static_cast<uint32_t>(a * n + b);
        if (me == a) {
          ASSERT_TRUE(t.send(other, message.data(), out, tag).isOk());
          ASSERT_TRUE(t.recv(other, got.data(), in, tag).isOk());
        } else {
          ASSERT_TRUE(t.recv(other, got.data(), in, tag).isOk());
          ASSERT_TRUE(t.send(other, message.data(), out, tag).isOk());
        }
        EXPECT_EQ(got, pattern(other, me, in)) << "from rank " << other;
        sent[other] += out;
        received[other] += in;
      }
    }
    const TransportCounters c = t.counters();
    EXPECT_EQ(c.bytesSent, sent);
    EXPECT_EQ(c.bytesReceived, received);
    EXPECT_TRUE(t.barrier().isOk());
  });
}

TEST_P(TransportTest, RecvMatchesTagsOutOfOrder) {
  run([&](Transport& t) {
    if (t.size() < 2 || t.rank() > 1) return;
    const int first = 11;
    const int second = 22;
    if (t.rank() == 0) {
      ASSERT_TRUE(t.send(1, &first, sizeof(first), 5).isOk());
      ASSERT_TRUE(t.send(1, &second, sizeof(second), 7).isOk());
    } else {
      int a = 0;
      int b = 0;
      ASSERT_TRUE(t.recv(0, &b, sizeof(b), 7).isOk());
      ASSERT_TRUE(t.recv(0, &a, sizeof(a), 5).isOk());
      EXPECT_EQ(a, first);
      EXPECT_EQ(b, second);
    }
  });
}

TEST_P(TransportTest, BadArgumentsAreRejectedWithoutBreakingTheTransport) {
  run([&](Transport& t) {
    char byte = 0;
    EXPECT_EQ(t.send(t.rank(), &byte, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.send(t.size(), &byte, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.recv(-1, &byte, 1).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.send((t.rank() + 1) % t.size(), &byte, 1, Transport::kMaxUserTag + 1).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(t.broadcast(&byte, 1, t.size()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.alltoallv({}, nullptr).code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(t.barrier().isOk());
  });
}

TEST_P(TransportTest, AlltoallvRandomSizesWithEmptyPairsAndLargeMessages) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    std::vector<ByteVector> outgoing(n);
    std::vector<ConstBytes> sends(n);
    for (int p = 0; p < n; ++p) {
      outgoing[p] = pattern(me, p, pairBytes(me, p, n));
      sends[p] = ConstBytes{outgoing[p].data(), outgoing[p].size()};
    }
    t.resetCounters();
    std::vector<ByteVector> received;
    ASSERT_TRUE(t.alltoallv(sends, &received).isOk());
    ASSERT_EQ(received.size(), static_cast<size_t>(n));
    const TransportCounters c = t.counters();
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(received[p], pattern(p, me, pairBytes(p, me, n))) << "from rank " << p;
      EXPECT_EQ(c.bytesSent[p], p == me ? 0 : pairBytes(me, p, n)) << "to rank " << p;
      EXPECT_EQ(c.bytesReceived[p], p == me ? 0 : pairBytes(p, me, n)) << "from rank " << p;
    }
  });
}

TEST_P(TransportTest, AlltoallvAllEmpty) {
  run([&](Transport& t) {
    std::vector<ConstBytes> sends(t.size());
    std::vector<ByteVector> received(3, ByteVector(5));  // stale content must go
    ASSERT_TRUE(t.alltoallv(sends, &received).isOk());
    ASSERT_EQ(received.size(), static_cast<size_t>(t.size()));
    for (const ByteVector& r : received) EXPECT_TRUE(r.empty());
    EXPECT_EQ(t.counters().totalSent(), 0u);
  });
}

TEST_P(TransportTest, AllgathervWithEmptyContributions) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    auto bytesOf = [](int r) -> size_t { return r % 3 == 1 ? 0 : size_t(r) * 1000 + 7; };
    const ByteVector mine = pattern(me, -1, bytesOf(me));
    t.resetCounters();
    std::vector<ByteVector> gathered;
    ASSERT_TRUE(t.allgatherv(mine.data(), mine.size(), &gathered).isOk());
    ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
    const TransportCounters c = t.counters();
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(gathered[p], pattern(p, -1, bytesOf(p))) << "rank " << p;
      EXPECT_EQ(c.bytesSent[p], p == me ? 0 : bytesOf(me));
      EXPECT_EQ(c.bytesReceived[p], p == me ? 0 : bytesOf(p));
    }
    // Everyone empty.
    ASSERT_TRUE(t.allgatherv(nullptr, 0, &gathered).isOk());
    for (const ByteVector& g : gathered) EXPECT_TRUE(g.empty());
  });
}

// x_r[i] = (r + 1) * ((i % 13) - 6): small integers, exact in every dtype (bf16 included), so
// the sum n(n+1)/2 * ((i % 13) - 6) is checked exactly whatever the summation order.
template <typename T>
void checkAllreduce(Transport& t, DataType dtype, size_t count) {
  const int n = t.size();
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = fromDouble<T>((t.rank() + 1) * (static_cast<double>(i % 13) - 6));
  }
  t.resetCounters();
  ASSERT_TRUE(t.allreduce(data.data(), count, dtype).isOk()) << dataTypeName(dtype);
  const double ranks = n * (n + 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(toDouble(data[i]), ranks * (static_cast<double>(i % 13) - 6))
        << dataTypeName(dtype) << " element " << i << " of " << count;
  }
  // The ring moves each of n chunks n-1 times per phase, in the wire dtype.
  const TransportCounters c = t.counters();
  const uint64_t wire = dataTypeSize(wireDataType(dtype));
  const uint64_t expected = n == 1 ? 0 : 2 * uint64_t(n - 1) * count * wire;
  EXPECT_EQ(sumOverRanks(t, c.totalSent()), expected) << dataTypeName(dtype);
  EXPECT_EQ(sumOverRanks(t, c.totalReceived()), expected) << dataTypeName(dtype);
  if (n > 2) {
    const int right = (t.rank() + 1) % n;
    EXPECT_EQ(c.bytesSent[right], c.totalSent()) << "only the right neighbour hears from a rank";
  }
}

TEST_P(TransportTest, AllreduceEveryDtypeInClosedForm) {
  run([&](Transport& t) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{6}, size_t{1001}, size_t{65537}}) {
      checkAllreduce<float>(t, DataType::kFloat32, count);
      checkAllreduce<double>(t, DataType::kFloat64, count);
      checkAllreduce<int32_t>(t, DataType::kInt32, count);
      checkAllreduce<int64_t>(t, DataType::kInt64, count);
      checkAllreduce<Half>(t, DataType::kFloat16, count);
      checkAllreduce<BFloat16>(t, DataType::kBFloat16, count);
    }
  });
}

TEST_P(TransportTest, AllreduceInt32Wraps) {
  run([&](Transport& t) {
    int32_t x = INT32_MAX;
    ASSERT_TRUE(t.allreduce(&x, 1, DataType::kInt32).isOk());
    const uint32_t expected = static_cast<uint32_t>(INT32_MAX) * static_cast<uint32_t>(t.size());
    EXPECT_EQ(static_cast<uint32_t>(x), expected);
  });
}

// Min, max and product: x_r[i] = minMaxValue / productValue (transport_harness.h), so the
// closed-form reference over r is exact.
// Every rank's result has the same bytes as rank 0's.
void expectSameBitsEverywhere(Transport& t, const void* data, size_t bytes, const char* what) {
  std::vector<ByteVector> all;
  ASSERT_TRUE(t.allgatherv(data, bytes, &all).isOk());
  for (int p = 1; p < t.size(); ++p) {
    EXPECT_EQ(all[p], all[0]) << what << ": rank " << p << " differs from rank 0";
  }
}

template <typename T>
void checkReduceOp(Transport& t, DataType dtype, ReduceOp op, size_t count) {
  const int n = t.size();
  const bool product = op == ReduceOp::kProduct;
  const bool integral = std::is_integral_v<T>;
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] =
        fromDouble<T>(product ? productValue(t.rank(), i, integral) : minMaxValue(t.rank(), i));
  }
  t.resetCounters();
  ASSERT_TRUE(t.allreduce(data.data(), count, dtype, op).isOk())
      << dataTypeName(dtype) << " " << reduceOpName(op);
  const uint64_t sent = t.counters().totalSent();
  for (size_t i = 0; i < count; ++i) {
    double expected = product ? 1.0 : minMaxValue(0, i);
    for (int r = product ? 0 : 1; r < n; ++r) {
      const double v = product ? productValue(r, i, integral) : minMaxValue(r, i);
      if (op == ReduceOp::kMin) expected = std::min(expected, v);
      if (op == ReduceOp::kMax) expected = std::max(expected, v);
      if (product) expected *= v;
    }
    ASSERT_EQ(toDouble(data[i]), expected)
        << dataTypeName(dtype) << " " << reduceOpName(op) << " element " << i << " of " << count;
  }
  expectSameBitsEverywhere(t, data.data(), count * sizeof(T), reduceOpName(op));
  // The same ring as a sum: the counters do not depend on the op.
  const uint64_t wire = dataTypeSize(wireDataType(dtype));
  const uint64_t expected = n == 1 ? 0 : 2 * uint64_t(n - 1) * count * wire;
  EXPECT_EQ(sumOverRanks(t, sent), expected) << reduceOpName(op);
}

TEST_P(TransportTest, AllreduceMinMaxProductEveryDtypeInClosedForm) {
  run([&](Transport& t) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{6}, size_t{1001}, size_t{65537}}) {
        checkReduceOp<float>(t, DataType::kFloat32, op, count);
        checkReduceOp<double>(t, DataType::kFloat64, op, count);
        checkReduceOp<int32_t>(t, DataType::kInt32, op, count);
        checkReduceOp<int64_t>(t, DataType::kInt64, op, count);
        checkReduceOp<Half>(t, DataType::kFloat16, op, count);
        checkReduceOp<BFloat16>(t, DataType::kBFloat16, op, count);
      }
    }
  });
}

// Products that round: every rank still gets the same bits (each element is reduced once and
// then copied), fp16 rounded once from the fp32 product.
TEST_P(TransportTest, AllreduceInexactProductHasIdenticalBitsOnEveryRank) {
  run([&](Transport& t) {
    const size_t count = 4099;
    std::vector<float> f(count);
    std::vector<double> d(count);
    std::vector<Half> h(count);
    for (size_t i = 0; i < count; ++i) {
      const double v = 1.0 + static_cast<double>((i * 13 + t.rank() * 7) % 29) / 31.0;
      f[i] = static_cast<float>(v);
      d[i] = v;
      h[i] = toHalf(static_cast<float>(v));
    }
    ASSERT_TRUE(t.allreduce(f.data(), count, DataType::kFloat32, ReduceOp::kProduct).isOk());
    ASSERT_TRUE(t.allreduce(d.data(), count, DataType::kFloat64, ReduceOp::kProduct).isOk());
    ASSERT_TRUE(t.allreduce(h.data(), count, DataType::kFloat16, ReduceOp::kProduct).isOk());
    expectSameBitsEverywhere(t, f.data(), count * sizeof(float), "fp32 product");
    expectSameBitsEverywhere(t, d.data(), count * sizeof(double), "fp64 product");
    expectSameBitsEverywhere(t, h.data(), count * sizeof(Half), "fp16 product");
    for (size_t i = 0; i < count; ++i) {
      double exact = 1.0;
      for (int r = 0; r < t.size(); ++r) {
        exact *= toFloat(
            toHalf(static_cast<float>(1.0 + static_cast<double>((i * 13 + r * 7) % 29) / 31.0)));
      }
      // fp32 products of a handful of factors, rounded once to fp16: within one fp16 ulp.
      ASSERT_NEAR(toFloat(h[i]), exact, std::abs(exact) * 1e-3) << "element " << i;
    }
  });
}

TEST_P(TransportTest, AllreduceIntegerProductsWrap) {
  run([&](Transport& t) {
    int32_t x = 65537;  // 2^16 + 1
    int64_t y = (int64_t{1} << 40) + 3;
    ASSERT_TRUE(t.allreduce(&x, 1, DataType::kInt32, ReduceOp::kProduct).isOk());
    ASSERT_TRUE(t.allreduce(&y, 1, DataType::kInt64, ReduceOp::kProduct).isOk());
    uint32_t ex = 1;
    uint64_t ey = 1;
    for (int r = 0; r < t.size(); ++r) {
      ex *= 65537u;
      ey *= (uint64_t{1} << 40) + 3;
    }
    EXPECT_EQ(static_cast<uint32_t>(x), ex);
    EXPECT_EQ(static_cast<uint64_t>(y), ey);
    int32_t lo = t.rank() == 0 ? INT32_MIN : t.rank();
    int64_t hi = t.rank() == t.size() - 1 ? INT64_MAX : -t.rank();
    ASSERT_TRUE(t.allreduce(&lo, 1, DataType::kInt32, ReduceOp::kMin).isOk());
    ASSERT_TRUE(t.allreduce(&hi, 1, DataType::kInt64, ReduceOp::kMax).isOk());
    EXPECT_EQ(lo, INT32_MIN);
    EXPECT_EQ(hi, INT64_MAX);
  });
}

TEST_P(TransportTest, AllreduceRefusesAverageAndUnknownOps) {
  run([&](Transport& t) {
    float x = 1.0f;
    EXPECT_EQ(t.allreduce(&x, 1, DataType::kFloat32, ReduceOp::kAverage).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(t.allreduce(&x, 1, DataType::kFloat32, static_cast<ReduceOp>(9)).code(),
              StatusCode::kInvalidArgument);
    // Argument errors do not break the transport.
    ASSERT_TRUE(t.allreduce(&x, 1, DataType::kFloat32, ReduceOp::kMax).isOk());
    EXPECT_EQ(x, 1.0f);
  });
}

TEST_P(TransportTest, BroadcastFromEveryRoot) {
  run([&](Transport& t) {
    const int n = t.size();
    for (int root = 0; root < n; ++root) {
      for (size_t bytes : {size_t{0}, size_t{5}, size_t{1} << 20}) {
        ByteVector buffer = t.rank() == root ? pattern(root, -2, bytes) : ByteVector(bytes, 0xab);
        t.resetCounters();
        ASSERT_TRUE(t.broadcast(buffer.data(), bytes, root).isOk());
        EXPECT_EQ(buffer, pattern(root, -2, bytes)) << "root " << root << ", " << bytes << " B";
        const TransportCounters c = t.counters();
        for (int p = 0; p < n; ++p) {
          EXPECT_EQ(c.bytesSent[p], t.rank() == root && p != root ? bytes : 0);
          EXPECT_EQ(c.bytesReceived[p], t.rank() != root && p == root ? bytes : 0);
        }
      }
    }
  });
}

// The last rank arrives late; nobody may leave the barrier before it arrives.
TEST_P(TransportTest, BarrierWaitsForTheLastRank) {
  run([&](Transport& t) {
    for (int i = 0; i < 9; ++i) ASSERT_TRUE(t.barrier().isOk());
    // Taken before the last warm-up barrier, so every rank's start precedes the last rank's
    // sleep however the ranks are scheduled after it (a rank descheduled on leaving that
    // barrier would otherwise start its clock late and see less than 300 ms).
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(t.barrier().isOk());
    if (t.size() == 1) return;
    if (t.rank() == t.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t.resetCounters();
    ASSERT_TRUE(t.barrier().isOk());
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
    EXPECT_EQ(t.counters().totalSent(), 0u) << "a barrier carries no payload";
  });
}

// Sizes above the MPI chunk limit (lowered to 1000 B) take the multi-call paths; the other
// backends run the same calls.
TEST_P(TransportTest, MessagesLargerThanOneChunk) {
  RankOptions options;
  options.mpiMaxChunkBytes = 1000;
  run(
      [&](Transport& t) {
        const int n = t.size();
        const int me = t.rank();
        std::vector<ByteVector> outgoing(n);
        std::vector<ConstBytes> sends(n);
        for (int p = 0; p < n; ++p) {
          outgoing[p] = pattern(me, p, (me + p) % 3 == 0 ? 0 : 2500 + 1000 * p);
          sends[p] = ConstBytes{outgoing[p].data(), outgoing[p].size()};
        }
        std::vector<ByteVector> received;
        ASSERT_TRUE(t.alltoallv(sends, &received).isOk());
        for (int p = 0; p < n; ++p) {
          EXPECT_EQ(received[p], pattern(p, me, (me + p) % 3 == 0 ? 0 : 2500 + 1000 * me));
        }
        const ByteVector mine = pattern(me, -3, 1234 * me + 999);
        std::vector<ByteVector> gathered;
        ASSERT_TRUE(t.allgatherv(mine.data(), mine.size(), &gathered).isOk());
        for (int p = 0; p < n; ++p) EXPECT_EQ(gathered[p], pattern(p, -3, 1234 * p + 999));
        checkAllreduce<double>(t, DataType::kFloat64, 1000);
        checkAllreduce<Half>(t, DataType::kFloat16, 777);
        ByteVector buffer = me == 0 ? pattern(0, -4, 4321) : ByteVector(4321);
        ASSERT_TRUE(t.broadcast(buffer.data(), buffer.size(), 0).isOk());
        EXPECT_EQ(buffer, pattern(0, -4, 4321));
        if (n >= 2 && me < 2) {
          const ByteVector out = pattern(me, 1 - me, 3001);
          ByteVector in(3001);
          if (me == 0) {
            ASSERT_TRUE(t.send(1, out.data(), out.size()).isOk());
            ASSERT_TRUE(t.recv(1, in.data(), in.size()).isOk());
          } else {
            ASSERT_TRUE(t.recv(0, in.data(), in.size()).isOk());
            ASSERT_TRUE(t.send(0, out.data(), out.size()).isOk());
          }
          EXPECT_EQ(in, pattern(1 - me, me, 3001));
        }
      },
      options);
}

// sendRecv around the ring (right and left are one peer at n = 2) with sizes from empty to
// several MPI chunks (lowered to 1000 B), then one-way (a direction of -1) from rank 0 to 1;
// contents checked in closed form and the counters against the sizes.
TEST_P(TransportTest, SendRecvRingAndOneWay) {
  RankOptions options;
  options.mpiMaxChunkBytes = 1000;
  run(
      [&](Transport& t) {
        const int n = t.size();
        const int me = t.rank();
        if (n < 2) return;
        const int right = (me + 1) % n;
        const int left = (me - 1 + n) % n;
        auto size = [n](int from, int to) { return pairBytes(from, to, n) % 70000 + from * 1000; };
        t.resetCounters();
        std::vector<uint64_t> sent(n, 0), received(n, 0);
        const ByteVector out = pattern(me, right, size(me, right));
        ByteVector in(5, 0xee);  // replaced by the message, whatever its size
        ASSERT_TRUE(t.sendRecv(right, out.data(), out.size(), left, &in, 9).isOk());
        EXPECT_EQ(in, pattern(left, me, size(left, me)));
        sent[right] += out.size();
        received[left] += in.size();
        if (me < 2) {
          const ByteVector one = pattern(0, 1, 2501);
          ByteVector got;
          if (me == 0) {
            ASSERT_TRUE(t.sendRecv(1, one.data(), one.size(), -1, nullptr, 10).isOk());
            sent[1] += one.size();
          } else {
            ASSERT_TRUE(t.sendRecv(-1, nullptr, 0, 0, &got, 10).isOk());
            EXPECT_EQ(got, one);
            received[0] += got.size();
          }
        }
        const TransportCounters c = t.counters();
        EXPECT_EQ(c.bytesSent, sent);
        EXPECT_EQ(c.bytesReceived, received);
        EXPECT_TRUE(t.barrier().isOk());
      },
      options);
}

TEST_P(TransportTest, SendRecvBadArgumentsAreRejectedWithoutBreakingTheTransport) {
  run([&](Transport& t) {
    char byte = 0;
    ByteVector in;
    const int other = (t.rank() + 1) % t.size();
    EXPECT_EQ(t.sendRecv(t.rank(), &byte, 1, -1, &in).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.sendRecv(-1, &byte, 1, t.size(), &in).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.sendRecv(-2, &byte, 1, -1, &in).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.sendRecv(other, nullptr, 1, -1, &in).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.sendRecv(-1, nullptr, 0, other, nullptr).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.sendRecv(-1, nullptr, 0, -1, &in, Transport::kMaxUserTag + 1).code(),
              StatusCode::kInvalidArgument);
    EXPECT_TRUE(t.barrier().isOk());
  });
}

// Rank 1 never sends: rank 0's receive must end in kTimeout naming rank 1, well within the
// bound, and the transport stays failed afterwards.
TEST_P(TransportTest, PeerThatNeverSendsTimesOut) {
  RankOptions options;
  options.timeoutSeconds = 0.5;
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() != 0) return;
        int x = 0;
        const auto start = std::chrono::steady_clock::now();
        const Status s = t.recv(1, &x, sizeof(x));
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
        EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.toString();
        EXPECT_GE(took, std::chrono::milliseconds(450));
        EXPECT_LT(took, std::chrono::seconds(10));  // generous: a loaded machine stalls threads
        EXPECT_EQ(t.barrier().code(), StatusCode::kAborted);
      },
      options);
}

// Rank 1 gives its transport up from outside a call (failAll: a device copy failed there):
// rank 0, waiting on it, fails at once with rank 1's cause, long before its timeout, and
// rank 1's own later calls are kAborted.
TEST_P(TransportTest, FailAllTellsThePeersAtOnce) {
  RankOptions options;
  options.timeoutSeconds = 30;
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() > 1) return;
        if (t.rank() == 1) {
          t.failAll(Status(StatusCode::kInternal, "device fault in the test"));
          int x = 0;
          const Status s = t.send(0, &x, sizeof(x));
          EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
          EXPECT_NE(s.message().find("device fault in the test"), std::string::npos)
              << s.toString();
          return;
        }
        int x = 0;
        const auto start = std::chrono::steady_clock::now();
        expectTold(t.recv(1, &x, sizeof(x)),
                   "rank 1 aborted after an error (device fault in the test)", t.rank());
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
      },
      options);
}

// Rank 0 times out waiting for rank 1, which waits for rank 0 but started later: rank 1 (and
// every other rank, waiting on rank 0 too) hears of rank 0's timeout when it happens, instead
// of timing out itself later.
TEST_P(TransportTest, ATimeoutTellsThePeersAtOnce) {
  RankOptions options;
  options.timeoutSeconds = 1.5;
  run(
      [&](Transport& t) {
        if (t.size() < 2) return;
        int x = 0;
        if (t.rank() == 0) {
          const Status s = t.recv(1, &x, sizeof(x));
          EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(800));
        expectTold(t.recv(0, &x, sizeof(x)),
                   "rank 0 aborted after an error (rank 0: recv timed out", t.rank());
      },
      options);
}

}  // namespace
}  // namespace zen::ops::testing
