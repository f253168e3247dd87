// Transport::subset, process sets' data plane, written once like transport_test.cc and run
// with it on every backend and world size (in-process and TCP ranks as threads at 1, 2, 3, 4
// and 7 ranks, MPI under mpirun -np 1..7). Every input is a function of the sender's job
// rank, so each member computes the reference of a set's collective directly from every
// member's input, without the transport under test. At 4 ranks the sets are {0,2} and {1,3}
// at the same time, {1,2,3}, {2} and {0,1,2,3}.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

#include "core/float16.h"
#include "ops/reduce.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

using Members = std::vector<int32_t>;

Members ranksWhere(int n, const std::function<bool(int)>& keep) {
  Members out;
  for (int r = 0; r < n; ++r) {
    if (keep(r)) out.push_back(r);
  }
  return out;
}

Members everyRank(int n) {
  return ranksWhere(n, [](int) { return true; });
}

bool isMember(const Members& members, int rank) {
  return std::binary_search(members.begin(), members.end(), rank);
}

std::unique_ptr<Transport> makeSubset(Transport& t, const Members& members, int32_t setId) {
  Result<std::unique_ptr<Transport>> made = t.subset(members, setId);
  EXPECT_TRUE(made.isOk()) << made.status().toString();
  if (!made.isOk()) return nullptr;
  return std::move(made).value();
}

ByteVector pattern(int from, int to, size_t bytes) {
  ByteVector v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = patternByte(from, to, i);
  return v;
}

// Bytes job rank `from` sends job rank `to` in set `salt`'s exchanges: empty, tiny, odd and
// 100 kB messages, different per set.
size_t messageBytes(int from, int to, int salt) {
  static constexpr size_t kSizes[] = {0, 1, 17, 4096, 100003, 0, 555};
  return kSizes[(from * 3 + to * 5 + salt) % 7];
}

// s is a transport over the job ranks `members` (the job's own transport: every rank); `salt`
// varies the data between sets and rounds. Each check below names peers by rank within s and
// computes its reference from members' job ranks.
void checkAlltoallv(Transport& s, const Members& members, int salt) {
  const int n = s.size();
  const int me = s.rank();
  const int job = members[me];
  std::vector<ByteVector> outgoing(n);
  std::vector<ConstBytes> sends(n);
  for (int p = 0; p < n; ++p) {
    outgoing[p] = pattern(job + salt, members[p], messageBytes(job, members[p], salt));
    sends[p] = ConstBytes{outgoing[p].data(), outgoing[p].size()};
  }
  s.resetCounters();
  std::vector<ByteVector> received;
  ASSERT_TRUE(s.alltoallv(sends, &received).isOk());
  ASSERT_EQ(received.size(), static_cast<size_t>(n));
  const TransportCounters c = s.counters();
  for (int p = 0; p < n; ++p) {
    const size_t in = messageBytes(members[p], job, salt);
    EXPECT_EQ(received[p], pattern(members[p] + salt, job, in)) << "from set rank " << p;
    EXPECT_EQ(c.bytesSent[p], p == me ? 0 : outgoing[p].size()) << "to set rank " << p;
    EXPECT_EQ(c.bytesReceived[p], p == me ? 0 : in) << "from set rank " << p;
  }
}

void checkAllgatherv(Transport& s, const Members& members, int salt) {
  const int n = s.size();
  const int me = s.rank();
  auto bytesOf = [&](int job) { return messageBytes(job, job + 1, salt); };
  const ByteVector mine = pattern(members[me] + salt, -1, bytesOf(members[me]));
  s.resetCounters();
  std::vector<ByteVector> gathered;
  ASSERT_TRUE(s.allgatherv(mine.data(), mine.size(), &gathered).isOk());
  ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
  const TransportCounters c = s.counters();
  for (int p = 0; p < n; ++p) {
    EXPECT_EQ(gathered[p], pattern(members[p] + salt, -1, bytesOf(members[p]))) << "set rank " << p;
    EXPECT_EQ(c.bytesSent[p], p == me ? 0 : mine.size());
    EXPECT_EQ(c.bytesReceived[p], p == me ? 0 : bytesOf(members[p]));
  }
}

// Job rank j's element i: small integers (sum), minMaxValue or productValue, exact in every
// dtype, so the reference folded over the members is exact too.
double elementOf(int job, size_t i, ReduceOp op, bool integral, int salt) {
  const size_t k = i + static_cast<size_t>(salt);
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) return minMaxValue(job, k);
  if (op == ReduceOp::kProduct) return productValue(job, k, integral);
  return (job + 1) * (static_cast<double>(k % 13) - 6);
}

double referenceOf(const Members& members, size_t i, ReduceOp op, bool integral, int salt) {
  double out = elementOf(members[0], i, op, integral, salt);
  for (size_t m = 1; m < members.size(); ++m) {
    const double v = elementOf(members[m], i, op, integral, salt);
    if (op == ReduceOp::kSum) out += v;
    if (op == ReduceOp::kMin) out = std::min(out, v);
    if (op == ReduceOp::kMax) out = std::max(out, v);
    if (op == ReduceOp::kProduct) out *= v;
  }
  return out;
}

template <typename T>
void checkAllreduce(
    Transport& s, const Members& members, DataType dtype, ReduceOp op, size_t count, int salt) {
  const int n = s.size();
  const int job = members[s.rank()];
  const bool integral = std::is_integral_v<T>;
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = fromDouble<T>(elementOf(job, i, op, integral, salt));
  s.resetCounters();
  ASSERT_TRUE(s.allreduce(data.data(), count, dtype, op).isOk())
      << dataTypeName(dtype) << " " << reduceOpName(op);
  const uint64_t sent = s.counters().totalSent();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(toDouble(data[i]), referenceOf(members, i, op, integral, salt))
        << dataTypeName(dtype) << " " << reduceOpName(op) << " element " << i << " of " << count;
  }
  // The ring over the set: each of n chunks moves n-1 times per phase, in the wire dtype.
  const uint64_t wire = dataTypeSize(wireDataType(dtype));
  EXPECT_EQ(sumOverRanks(s, sent), n == 1 ? 0 : 2 * uint64_t(n - 1) * count * wire);
}

// Block p holds counts[p] elements (block 1 is empty); set rank p ends with the sum over the
// members of block p.
template <typename T>
void checkReducescatter(Transport& s, const Members& members, DataType dtype, int salt) {
  const int n = s.size();
  const int me = s.rank();
  std::vector<size_t> counts(n);
  std::vector<size_t> begins(n + 1, 0);
  for (int p = 0; p < n; ++p) {
    counts[p] = p == 1 ? 0 : 50 + 13 * static_cast<size_t>(p);
    begins[p + 1] = begins[p] + counts[p];
  }
  std::vector<T> data(begins[n]);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = fromDouble<T>(elementOf(members[me], i, ReduceOp::kSum, false, salt));
  }
  ASSERT_TRUE(s.reducescatter(data.data(), counts, dtype).isOk()) << dataTypeName(dtype);
  for (size_t i = begins[me]; i < begins[me + 1]; ++i) {
    ASSERT_EQ(toDouble(data[i]), referenceOf(members, i, ReduceOp::kSum, false, salt))
        << dataTypeName(dtype) << " element " << i;
  }
}

// From the last set rank (not 0 once the set has two members).
void checkBroadcast(Transport& s, const Members& members, int salt) {
  const int root = s.size() - 1;
  const size_t bytes = 100003;
  const ByteVector expected = pattern(members[root] + salt, -2, bytes);
  ByteVector buffer = s.rank() == root ? expected : ByteVector(bytes, 0xab);
  s.resetCounters();
  ASSERT_TRUE(s.broadcast(buffer.data(), bytes, root).isOk());
  EXPECT_EQ(buffer, expected);
  const TransportCounters c = s.counters();
  for (int p = 0; p < s.size(); ++p) {
    EXPECT_EQ(c.bytesSent[p], s.rank() == root && p != root ? bytes : 0);
    EXPECT_EQ(c.bytesReceived[p], s.rank() != root && p == root ? bytes : 0);
  }
}

// send/recv between set ranks 0 and n-1 (0 sends first), then sendRecv around the set's ring.
void checkPointToPoint(Transport& s, const Members& members, int salt) {
  const int n = s.size();
  const int me = s.rank();
  if (n < 2) return;
  s.resetCounters();
  std::vector<uint64_t> sent(n, 0), received(n, 0);
  if (me == 0 || me == n - 1) {
    const int other = me == 0 ? n - 1 : 0;
    const ByteVector out = pattern(members[me] + salt, members[other], 3001);
    ByteVector in(3001);
    if (me == 0) {
      ASSERT_TRUE(s.send(other, out.data(), out.size(), 3).isOk());
      ASSERT_TRUE(s.recv(other, in.data(), in.size(), 3).isOk());
    } else {
      ASSERT_TRUE(s.recv(other, in.data(), in.size(), 3).isOk());
      ASSERT_TRUE(s.send(other, out.data(), out.size(), 3).isOk());
    }
    EXPECT_EQ(in, pattern(members[other] + salt, members[me], 3001));
    sent[other] += out.size();
    received[other] += in.size();
  }
  const int right = (me + 1) % n;
  const int left = (me - 1 + n) % n;
  const ByteVector out =
      pattern(members[me] + salt, members[right], messageBytes(members[me], members[right], salt));
  ByteVector in(5, 0xee);
  ASSERT_TRUE(s.sendRecv(right, out.data(), out.size(), left, &in, 4).isOk());
  EXPECT_EQ(in, pattern(members[left] + salt, members[me],
                        messageBytes(members[left], members[me], salt)));
  sent[right] += out.size();
  received[left] += in.size();
  const TransportCounters c = s.counters();
  EXPECT_EQ(c.bytesSent, sent);
  EXPECT_EQ(c.bytesReceived, received);
}

void checkEveryCollective(Transport& s, const Members& members, int32_t setId) {
  ASSERT_EQ(s.size(), static_cast<int>(members.size()));
  EXPECT_EQ(s.processSet(), setId);
  checkAlltoallv(s, members, setId);
  checkAllgatherv(s, members, setId);
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}}) {
    checkAllreduce<float>(s, members, DataType::kFloat32, ReduceOp::kSum, count, setId);
    checkAllreduce<int64_t>(s, members, DataType::kInt64, ReduceOp::kSum, count, setId);
    checkAllreduce<Half>(s, members, DataType::kFloat16, ReduceOp::kSum, count, setId);
    checkAllreduce<BFloat16>(s, members, DataType::kBFloat16, ReduceOp::kSum, count, setId);
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      checkAllreduce<float>(s, members, DataType::kFloat32, op, count, setId);
      checkAllreduce<int32_t>(s, members, DataType::kInt32, op, count, setId);
      checkAllreduce<Half>(s, members, DataType::kFloat16, op, count, setId);
    }
  }
  checkReducescatter<float>(s, members, DataType::kFloat32, setId);
  checkReducescatter<Half>(s, members, DataType::kFloat16, setId);
  checkBroadcast(s, members, setId);
  checkPointToPoint(s, members, setId);
  EXPECT_TRUE(s.barrier().isOk());
}

// Every rank makes its sets in one order: its parity set (evens and odds run at the same
// time), all but rank 0, a one-rank set, everyone.
TEST_P(TransportTest, SubsetsRunEveryCollectiveAgainstADenseReference) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    std::vector<std::pair<int32_t, Members>> sets;
    sets.emplace_back(1 + me % 2, ranksWhere(n, [&](int r) { return r % 2 == me % 2; }));
    if (me >= 1) sets.emplace_back(3, ranksWhere(n, [](int r) { return r >= 1; }));
    if (me == n / 2) sets.emplace_back(4, Members{me});
    sets.emplace_back(5, everyRank(n));
    t.resetCounters();
    for (const auto& [setId, members] : sets) {
      std::unique_ptr<Transport> s = makeSubset(t, members, setId);
      ASSERT_TRUE(s);
      EXPECT_EQ(s->rank(), std::find(members.begin(), members.end(), me) - members.begin());
      EXPECT_STREQ(s->backendName(), t.backendName());
      checkEveryCollective(*s, members, setId);
    }
    const TransportCounters c = t.counters();
    EXPECT_EQ(c.totalSent(), 0u) << "a subset's payload is counted in the subset only";
    EXPECT_EQ(c.totalReceived(), 0u);
    EXPECT_TRUE(t.barrier().isOk());
  });
}

// The job and the set {1, ..., n-1} alternate collectives with different data (ranks 1 and 2
// carry both), then rank 1 sends rank 2 a job message and a set message with the same user tag,
// which rank 2 takes in the opposite order.
TEST_P(TransportTest, SubsetAndJobInterleaveBetweenTheSamePair) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    const Members all = everyRank(n);
    const Members members = n == 1 ? all : ranksWhere(n, [](int r) { return r >= 1; });
    std::unique_ptr<Transport> s;
    if (isMember(members, me)) {
      s = makeSubset(t, members, 7);
      ASSERT_TRUE(s);
    }
    for (int round = 0; round < 3; ++round) {
      checkAllreduce<float>(t, all, DataType::kFloat32, ReduceOp::kSum, 1001, round);
      if (s)
        checkAllreduce<float>(*s, members, DataType::kFloat32, ReduceOp::kSum, 1001, 9 + round);
      checkAlltoallv(t, all, round);
      if (s) checkAlltoallv(*s, members, 9 + round);
      checkAllgatherv(t, all, round);
      if (s) checkBroadcast(*s, members, 9 + round);
      checkBroadcast(t, all, round);
      if (s) checkAllreduce<Half>(*s, members, DataType::kFloat16, ReduceOp::kMax, 777, round);
    }
    if (n >= 3 && (me == 1 || me == 2)) {
      const uint64_t job = 1000 + me;
      const uint64_t set = 2000 + me;
      if (me == 1) {
        ASSERT_TRUE(t.send(2, &job, sizeof(job), 5).isOk());
        ASSERT_TRUE(s->send(1, &set, sizeof(set), 5).isOk());  // set rank 1 is job rank 2
      } else {
        uint64_t fromSet = 0;
        uint64_t fromJob = 0;
        ASSERT_TRUE(s->recv(0, &fromSet, sizeof(fromSet), 5).isOk());
        ASSERT_TRUE(t.recv(1, &fromJob, sizeof(fromJob), 5).isOk());
        EXPECT_EQ(fromSet, 2001u);
        EXPECT_EQ(fromJob, 1001u);
      }
    }
    EXPECT_TRUE(t.barrier().isOk());
  });
}

// Sets 11 and 12 both hold every rank: their collectives and same-tag messages never mix.
// Out of order, rank 0 broadcasts in set 11 then 12 while the others take 12's first: only the
// message backends' tag spaces allow that (MPI collectives of two communicators must not be
// waited for in different orders).
TEST_P(TransportTest, SetsWithTheSameMembersButDifferentIdsStaySeparate) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    const Members all = everyRank(n);
    std::unique_ptr<Transport> a = makeSubset(t, all, 11);
    std::unique_ptr<Transport> b = makeSubset(t, all, 12);
    ASSERT_TRUE(a && b);
    checkAllreduce<double>(*a, all, DataType::kFloat64, ReduceOp::kSum, 999, 1);
    checkAllreduce<double>(*b, all, DataType::kFloat64, ReduceOp::kSum, 999, 2);
    checkAlltoallv(*b, all, 2);
    checkAlltoallv(*a, all, 1);
    checkAllgatherv(*a, all, 1);
    checkAllgatherv(*b, all, 2);
    if (n >= 2 && (me == 0 || me == n - 1)) {
      const uint32_t x = 111;
      const uint32_t y = 222;
      if (me == 0) {
        ASSERT_TRUE(a->send(n - 1, &x, sizeof(x), 1).isOk());
        ASSERT_TRUE(b->send(n - 1, &y, sizeof(y), 1).isOk());
      } else {
        uint32_t fromB = 0;
        uint32_t fromA = 0;
        ASSERT_TRUE(b->recv(0, &fromB, sizeof(fromB), 1).isOk());
        ASSERT_TRUE(a->recv(0, &fromA, sizeof(fromA), 1).isOk());
        EXPECT_EQ(fromA, x);
        EXPECT_EQ(fromB, y);
      }
    }
    if (backend() != Backend::kMpi) {
      const ByteVector fromA = pattern(0, 11, 4099);
      const ByteVector fromB = pattern(0, 12, 5003);
      ByteVector gotA = me == 0 ? fromA : ByteVector(fromA.size());
      ByteVector gotB = me == 0 ? fromB : ByteVector(fromB.size());
      if (me == 0) {
        ASSERT_TRUE(a->broadcast(gotA.data(), gotA.size(), 0).isOk());
        ASSERT_TRUE(b->broadcast(gotB.data(), gotB.size(), 0).isOk());
      } else {
        ASSERT_TRUE(b->broadcast(gotB.data(), gotB.size(), 0).isOk());
        ASSERT_TRUE(a->broadcast(gotA.data(), gotA.size(), 0).isOk());
      }
      EXPECT_EQ(gotA, fromA);
      EXPECT_EQ(gotB, fromB);
    }
    EXPECT_TRUE(a->barrier().isOk());
    EXPECT_TRUE(b->barrier().isOk());
  });
}

// Refused on the calling rank alone, the transport unharmed; then a subset of a subset (the
// even set ranks of {1, ..., n-1}) runs with its members numbered within the outer set.
TEST_P(TransportTest, SubsetArgumentErrorsAndASubsetOfASubset) {
  run([&](Transport& t) {
    const int n = t.size();
    const int me = t.rank();
    const Members all = everyRank(n);
    auto refused = [&](const Members& members, int32_t setId, const char* says) {
      const Status s = t.subset(members, setId).status();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_NE(s.message().find(says), std::string::npos) << s.toString();
    };
    refused({}, 1, "no members");
    refused(all, 0, "outside [1, 65535]");
    refused(all, -3, "outside [1, 65535]");
    refused(all, Transport::kMaxProcessSetId + 1, "outside [1, 65535]");
    refused({me, me}, 1, "not strictly ascending");
    refused({-1, me}, 1, "names rank -1");
    refused({me, n}, 1, "outside [0, ");
    if (n >= 2) {
      refused({(me + 1) % n}, 1, "is not a member");
      refused({n - 1, 0}, 1, "not strictly ascending");
    }
    ASSERT_TRUE(t.barrier().isOk());

    const Members outer = n == 1 ? all : ranksWhere(n, [](int r) { return r >= 1; });
    if (!isMember(outer, me)) return;
    std::unique_ptr<Transport> s = makeSubset(t, outer, 21);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->subset({s->size()}, 22).status().code(), StatusCode::kInvalidArgument);
    const Members inner = ranksWhere(s->size(), [](int r) { return r % 2 == 0; });
    if (!isMember(inner, s->rank())) return;
    std::unique_ptr<Transport> nested = makeSubset(*s, inner, 22);
    ASSERT_TRUE(nested);
    Members innerJob;
    for (int32_t r : inner) innerJob.push_back(outer[r]);
    EXPECT_EQ(nested->processSet(), 22);
    checkAllreduce<float>(*nested, innerJob, DataType::kFloat32, ReduceOp::kSum, 1001, 22);
    checkAlltoallv(*nested, innerJob, 22);
  });
}

// Rank 1 never takes part in set {0, 1}: rank 0 gets kTimeout naming it within the bound
// (under MPI already when creating the set's communicator, whose members meet first), and the
// job's transport is failed with it.
TEST_P(TransportTest, SubsetWithAnAbsentMemberTimesOutAndFailsTheJobTransport) {
  RankOptions options;
  options.timeoutSeconds = 0.5;
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() != 0) return;
        const auto start = std::chrono::steady_clock::now();
        Status s;
        std::unique_ptr<Transport> set;
        if (backend() == Backend::kMpi) {
          s = t.subset({0, 1}, 31).status();
        } else {
          set = makeSubset(t, {0, 1}, 31);
          ASSERT_TRUE(set);
          float v = 1;
          s = set->allreduce(&v, 1, DataType::kFloat32);
          EXPECT_NE(s.message().find("process set 31"), std::string::npos) << s.toString();
        }
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
        EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.toString();
        EXPECT_GE(took, std::chrono::milliseconds(450));
        EXPECT_LT(took, std::chrono::seconds(10));  // generous: a loaded machine stalls threads
        EXPECT_EQ(t.barrier().code(), StatusCode::kAborted);
        if (set) {
          EXPECT_EQ(set->barrier().code(), StatusCode::kAborted);
        }
      },
      options);
}

// Ranks 0 and 1 name set {0, 1} with different ids: under MPI the members' meeting refuses
// it on both; on the message backends the two ids are two tag spaces, so the set's first
// collective times out (or hears that the other timed out). Loud either way, within the bound.
TEST_P(TransportTest, MembersThatDisagreeOnTheSetIdFailLoudly) {
  RankOptions options;
  options.timeoutSeconds = 0.5;
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() > 1) return;
        const auto start = std::chrono::steady_clock::now();
        Result<std::unique_ptr<Transport>> made = t.subset({0, 1}, 41 + t.rank());
        Status s = made.status();
        if (backend() == Backend::kMpi) {
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
          EXPECT_NE(s.message().find(std::to_string(41 + t.rank())), std::string::npos)
              << s.toString();
        } else {
          ASSERT_TRUE(made.isOk()) << s.toString();
          s = made.value()->barrier();
          // The first to time out aborts, so the other may hear that first (kIoError).
          EXPECT_TRUE(s.code() == StatusCode::kTimeout || s.code() == StatusCode::kIoError)
              << s.toString();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
      },
      options);
}

// The other direction: the job's transport fails (rank 1 never sends), so its subset is
// failed too, without waiting. (The timeout is long enough that "without waiting", less than
// the timeout the set's barrier would otherwise wait, holds for a thread descheduled ~1 s.)
TEST_P(TransportTest, FailedJobTransportFailsItsSubsets) {
  RankOptions options;
  options.timeoutSeconds = 2.0;
  run(
      [&](Transport& t) {
        if (t.size() < 2 || t.rank() > 1) return;
        std::unique_ptr<Transport> set = makeSubset(t, {0, 1}, 32);
        ASSERT_TRUE(set);
        if (t.rank() == 1) return;
        int x = 0;
        EXPECT_EQ(t.recv(1, &x, sizeof(x)).code(), StatusCode::kTimeout);
        const auto start = std::chrono::steady_clock::now();
        const Status s = set->barrier();
        EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
        EXPECT_NE(s.message().find("process set 32"), std::string::npos) << s.toString();
        EXPECT_LT(std::chrono::steady_clock::now() - start,
                  std::chrono::duration<double>(options.timeoutSeconds));
      },
      options);
}

// A member gives a set up (failAll on the subset): every rank of the job hears why at once,
// the other member waiting in the set and a rank outside it waiting on the job's transport,
// each long before the timeout.
TEST_P(TransportTest, AFailureInASubsetTellsEveryRankOfTheJob) {
  RankOptions options;
  options.timeoutSeconds = 30;
  run(
      [&](Transport& t) {
        if (t.size() < 3 || t.rank() > 2) return;
        std::unique_ptr<Transport> set;
        if (t.rank() < 2) {
          set = makeSubset(t, {0, 1}, 33);
          ASSERT_TRUE(set);
        }
        if (t.rank() == 1) {
          set->failAll(Status(StatusCode::kInternal, "fault in the set"));
          return;
        }
        int x = 0;
        const auto start = std::chrono::steady_clock::now();
        expectTold(t.rank() == 0 ? set->recv(1, &x, sizeof(x)) : t.recv(1, &x, sizeof(x)),
                   "rank 1 aborted after an error (fault in the set)", t.rank());
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
      },
      options);
}

}  // namespace
}  // namespace zen::ops::testing
