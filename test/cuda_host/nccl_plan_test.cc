// The NCCL backend's host-side logic (cuda/nccl_plan.h): its poll loop naming the rank,
// segment-size checks and byte accounting, without CUDA or NCCL.
#include "cuda/nccl_plan.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "test/ops/transport_harness.h"

namespace zen::cuda {
namespace {

// The loop itself is bounded_wait_test.cc's; these check that the NCCL waits name the rank.
TEST(PollWithDeadline, FailureWithoutDetailIsInternal) {
  const Status s = pollWithDeadline([](Status*) { return PollState::kFailed; }, 5.0, 1, "op");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "rank 1: op failed (no detail)");
}

TEST(PollWithDeadline, TimesOutNamingRankAndCall) {
  const auto start = std::chrono::steady_clock::now();
  const Status s =
      pollWithDeadline([](Status*) { return PollState::kPending; }, 0.05, 2, "ncclAllReduce");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ncclAllReduce"), std::string::npos) << s.message();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 10.0);  // bounded, generously: a loaded machine stalls threads for seconds
}

TEST(SegmentChecks, Alltoallv) {
  EXPECT_TRUE(checkAlltoallvSizes(3, 1, {1, 2, 3}, {4, 2, 6}).isOk());
  EXPECT_EQ(checkAlltoallvSizes(3, 1, {1, 2}, {4, 2, 6}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(checkAlltoallvSizes(3, 1, {1, 2, 3}, {4, 5, 6}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(checkAlltoallvSizes(1, 0, {0}, {0}).isOk());
}

TEST(SegmentChecks, Allgatherv) {
  EXPECT_TRUE(checkAllgathervSizes(2, 0, 7, {7, 0}).isOk());
  EXPECT_EQ(checkAllgathervSizes(2, 0, 7, {6, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(checkAllgathervSizes(2, 0, 7, {7}).code(), StatusCode::kInvalidArgument);
}

TEST(PeerBytes, AlltoallvLeavesTheOwnSegmentOut) {
  const PeerBytes b = alltoallvBytes(3, 1, {1, 2, 3}, {4, 2, 6});
  EXPECT_EQ(b.sent, (std::vector<uint64_t>{1, 0, 3}));
  EXPECT_EQ(b.received, (std::vector<uint64_t>{4, 0, 6}));
}

TEST(PeerBytes, AllgathervSendsTheOwnPartToEveryPeer) {
  const PeerBytes b = allgathervBytes(3, 0, 5, {5, 0, 9});
  EXPECT_EQ(b.sent, (std::vector<uint64_t>{0, 5, 5}));
  EXPECT_EQ(b.received, (std::vector<uint64_t>{0, 0, 9}));
}

TEST(PeerBytes, AllreduceIsARingThatAddsUp) {
  for (int n : {1, 2, 3, 4, 7}) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{13}, size_t{4096}, size_t{1000003}}) {
      uint64_t sent = 0, received = 0;
      for (int r = 0; r < n; ++r) {
        const PeerBytes b = allreduceBytes(n, r, bytes);
        ASSERT_EQ(b.sent.size(), static_cast<size_t>(n));
        sent += std::accumulate(b.sent.begin(), b.sent.end(), uint64_t{0});
        received += std::accumulate(b.received.begin(), b.received.end(), uint64_t{0});
        if (n > 1) {
          EXPECT_EQ(b.sent[r], 0u);
        }
      }
      EXPECT_EQ(sent, 2 * static_cast<uint64_t>(n - 1) * bytes) << n << " " << bytes;
      EXPECT_EQ(received, sent);
    }
  }
}

TEST(PeerBytes, ReducescatterIsARingOfEveryBlockButTheOwn) {
  const PeerBytes b = reducescatterBytes(4, 3, 10);
  EXPECT_EQ(b.sent, (std::vector<uint64_t>{30, 0, 0, 0}));
  EXPECT_EQ(b.received, (std::vector<uint64_t>{0, 0, 30, 0}));
  const PeerBytes alone = reducescatterBytes(1, 0, 10);
  EXPECT_EQ(alone.sent, (std::vector<uint64_t>{0}));
  EXPECT_EQ(alone.received, (std::vector<uint64_t>{0}));
  // Half an allreduce of the same buffer.
  for (int n : {2, 3, 7}) {
    const PeerBytes all = allreduceBytes(n, 1, 100 * static_cast<size_t>(n));
    const PeerBytes half = reducescatterBytes(n, 1, 100);
    EXPECT_EQ(2 * half.sent[2 % n], all.sent[2 % n]) << n;
  }
}

TEST(PeerBytes, BroadcastFansOutFromTheRoot) {
  const PeerBytes root = broadcastBytes(3, 2, 10, 2);
  EXPECT_EQ(root.sent, (std::vector<uint64_t>{10, 10, 0}));
  EXPECT_EQ(root.received, (std::vector<uint64_t>{0, 0, 0}));
  const PeerBytes leaf = broadcastBytes(3, 0, 10, 2);
  EXPECT_EQ(leaf.sent, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(leaf.received, (std::vector<uint64_t>{0, 0, 10}));
}

// nccl.h's NCCL_VERSION: major * 1000 + minor * 100 + patch before 2.9, major * 10000 + ... since.
TEST(NcclVersion, DecodesBothEncodings) {
  const NcclVersion v2289 = decodeNcclVersion(22809);
  EXPECT_EQ(v2289.major, 2);
  EXPECT_EQ(v2289.minor, 28);
  EXPECT_EQ(v2289.patch, 9);
  EXPECT_EQ(v2289.toString(), "2.28.9");
  EXPECT_EQ(decodeNcclVersion(2804).toString(), "2.8.4");   // the old encoding
  EXPECT_EQ(decodeNcclVersion(20906).toString(), "2.9.6");  // the first of the new one
  EXPECT_EQ(decodeNcclVersion(21913).toString(), "2.19.13");
  EXPECT_EQ(decodeNcclVersion(30001).toString(), "3.0.1");
}

// Zen needs NCCL 2.14 (kLeastNcclVersion: the non-blocking config API): older is refused, naming
// the loaded, the built and the needed version; so is another major version.
TEST(NcclVersion, RefusesOneOlderThanZenNeedsNamingThem) {
  const Status s = checkNcclVersion(21304, 22809);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("2.13.4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2.28.9"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2.14"), std::string::npos) << s.message();
  EXPECT_EQ(checkNcclVersion(2808, 22809).code(), StatusCode::kFailedPrecondition);  // old encoding
  EXPECT_EQ(checkNcclVersion(22809, 30000).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(checkNcclVersion(30000, 22809).code(), StatusCode::kFailedPrecondition);
}

// A framework's NCCL older than the headers but new enough runs (torch's wheel decides which
// libnccl the process loads); the same and newer minors too.
TEST(NcclVersion, AllowsOlderThanTheHeadersDownToWhatZenNeeds) {
  EXPECT_TRUE(checkNcclVersion(21400, 22809).isOk());
  EXPECT_TRUE(checkNcclVersion(22703, 22809).isOk());
  EXPECT_TRUE(checkNcclVersion(22809, 22809).isOk());
  EXPECT_TRUE(checkNcclVersion(22900, 22809).isOk());
  EXPECT_TRUE(checkNcclVersion(21400, 21400).isOk());
}

// Every rank's verdict from every rank's version: the lowest bad rank named with its version,
// else two ranks that differ (NCCL's init refuses any difference, patch included).
TEST(NcclVersions, NameTheRankThatLoadsABadOneOrTwoThatDiffer) {
  EXPECT_TRUE(checkNcclVersions({22703, 22703, 22703}, 22809).isOk());
  EXPECT_TRUE(checkNcclVersions({22809}, 22809).isOk());
  Status s = checkNcclVersions({22809, 22809, 21304, 2808}, 22809);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2.13.4"), std::string::npos) << s.message();
  s = checkNcclVersions({22809, 0}, 22809);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 1 could not read"), std::string::npos) << s.message();
  s = checkNcclVersions({22809, 22809, 22807}, 22809);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 0 2.28.9, rank 2 2.28.7"), std::string::npos) << s.message();
}

// Real ranks over TCP (threads): one rank loads a too-old NCCL, and every rank fails at once
// with the same message naming it, none waiting for a peer (the transport's bound is far above
// what the test allows).
TEST(NcclVersions, EveryRankRefusesOneRanksOldNcclAtOnce) {
  constexpr int kRanks = 3;
  std::mutex mu;
  std::vector<Status> verdicts(kRanks);
  const auto start = std::chrono::steady_clock::now();
  ops::testing::RankOptions options;
  options.timeoutSeconds = 60.0;
  ops::testing::runRanks({ops::testing::Backend::kTcp, kRanks}, options, [&](ops::Transport& t) {
    const int loaded = t.rank() == 1 ? 21304 : 22809;
    const Status s = agreeOnNcclSetup(t, Status::ok(), loaded, 22809);
    std::lock_guard<std::mutex> lock(mu);
    verdicts[static_cast<size_t>(t.rank())] = s;
  });
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 30.0);  // the transport's bound is 60 s: nobody waited for it
  for (int r = 0; r < kRanks; ++r) {
    const Status& s = verdicts[static_cast<size_t>(r)];
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << "rank " << r << ": " << s.toString();
    EXPECT_NE(s.message().find("on rank 1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("2.13.4"), std::string::npos) << s.message();
    EXPECT_EQ(s.message(), verdicts[0].message());
  }
}

TEST(NcclVersions, RanksThatAgreePassAndThoseThatDifferFailTogether) {
  constexpr int kRanks = 2;
  for (const int other : {22809, 22703}) {
    std::mutex mu;
    std::vector<Status> verdicts(kRanks);
    ops::testing::runRanks({ops::testing::Backend::kTcp, kRanks}, {}, [&](ops::Transport& t) {
      const Status s = agreeOnNcclSetup(t, Status::ok(), t.rank() == 0 ? 22809 : other, 22809);
      std::lock_guard<std::mutex> lock(mu);
      verdicts[static_cast<size_t>(t.rank())] = s;
    });
    for (const Status& s : verdicts) {
      EXPECT_EQ(s.isOk(), other == 22809) << s.toString();
      if (!s.isOk()) {
        EXPECT_NE(s.message().find("rank 1 2.27.3"), std::string::npos) << s.message();
      }
    }
  }
}

// Real ranks over TCP (threads): a rank whose own setup failed (its pinned buffers) makes every
// rank fail at once naming it and its error, before any version verdict.
TEST(NcclSetup, EveryRankRefusesOneRanksFailedSetupAtOnce) {
  constexpr int kRanks = 3;
  std::mutex mu;
  std::vector<Status> verdicts(kRanks);
  ops::testing::RankOptions options;
  options.timeoutSeconds = 60.0;
  const auto start = std::chrono::steady_clock::now();
  ops::testing::runRanks({ops::testing::Backend::kTcp, kRanks}, options, [&](ops::Transport& t) {
    const Status local =
        t.rank() == 2 ? ZEN_ERROR(StatusCode::kInternal, "cudaHostAlloc of 48 bytes: out of memory")
                      : Status::ok();
    const Status s = agreeOnNcclSetup(t, local, t.rank() == 1 ? 21304 : 22809, 22809);
    std::lock_guard<std::mutex> lock(mu);
    verdicts[static_cast<size_t>(t.rank())] = s;
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  for (const Status& s : verdicts) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
    EXPECT_NE(s.message().find("rank 2 could not set up for NCCL: cudaHostAlloc of 48 bytes: out "
                               "of memory"),
              std::string::npos)
        << s.message();
  }
}

// Real ranks over TCP: rank 0's id reaches every rank byte for byte; when rank 0 could not make
// it, every peer fails at once with rank 0's message (cut to the id's size) and rank 0 with its
// own error.
TEST(NcclSetup, RankZerosUniqueIdOrItsFailureReachesEveryRank) {
  constexpr int kRanks = 3;
  constexpr size_t kIdBytes = 128;  // sizeof(ncclUniqueId)
  for (const bool fails : {false, true}) {
    const std::string cause = "ncclGetUniqueId failed: unhandled system error: " +
                              std::string(200, 'x');  // longer than the id
    std::mutex mu;
    std::vector<Status> verdicts(kRanks);
    std::vector<std::vector<uint8_t>> ids(kRanks);
    ops::testing::runRanks({ops::testing::Backend::kTcp, kRanks}, {}, [&](ops::Transport& t) {
      std::vector<uint8_t> id(kIdBytes, 0);
      Status made;
      if (t.rank() == 0) {
        for (size_t i = 0; i < kIdBytes; ++i) id[i] = static_cast<uint8_t>(i * 7 + 1);
        if (fails) made = ZEN_ERROR(StatusCode::kInternal, "{}", cause);
      }
      const Status s = shareNcclUniqueId(t, made, id.data(), id.size());
      std::lock_guard<std::mutex> lock(mu);
      verdicts[static_cast<size_t>(t.rank())] = s;
      ids[static_cast<size_t>(t.rank())] = id;
    });
    for (int r = 0; r < kRanks; ++r) {
      const Status& s = verdicts[static_cast<size_t>(r)];
      if (!fails) {
        EXPECT_TRUE(s.isOk()) << s.toString();
        EXPECT_EQ(ids[static_cast<size_t>(r)], ids[0]) << "rank " << r;
      } else if (r == 0) {
        EXPECT_EQ(s.code(), StatusCode::kInternal) << s.toString();
      } else {
        EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
        EXPECT_EQ(s.message(),
                  "rank 0 could not create the NCCL unique id: " + cause.substr(0, kIdBytes - 1));
      }
    }
  }
}

// The requests that end a communicator: the first reason wins; a fail (an input never ready)
// turns a pending abort into a fail, never the other way round; requests race from threads.
TEST(EndRequest, FirstReasonWinsAndAFailDowngradesAPendingAbort) {
  using Kind = EndRequest::Kind;
  Status why;
  EndRequest none;
  EXPECT_FALSE(none.pending());
  EXPECT_EQ(none.current(&why), Kind::kNone);

  EndRequest abortThenFail;
  abortThenFail.request(Status(StatusCode::kTimeout, "collective hung"), Kind::kAbort);
  ASSERT_TRUE(abortThenFail.pending());
  EXPECT_EQ(abortThenFail.current(&why), Kind::kAbort);
  abortThenFail.request(Status(StatusCode::kTimeout, "input never ready"), Kind::kFail);
  EXPECT_EQ(abortThenFail.current(&why), Kind::kFail);
  EXPECT_EQ(why.message(), "collective hung");

  EndRequest failThenAbort;
  failThenAbort.request(Status(StatusCode::kTimeout, "input never ready"), Kind::kFail);
  failThenAbort.request(Status(StatusCode::kTimeout, "collective hung"), Kind::kAbort);
  EXPECT_EQ(failThenAbort.current(&why), Kind::kFail);
  EXPECT_EQ(why.message(), "input never ready");

  EndRequest twoAborts;
  twoAborts.request(Status(StatusCode::kIoError, "first"), Kind::kAbort);
  twoAborts.request(Status(StatusCode::kIoError, "second"), Kind::kAbort);
  EXPECT_EQ(twoAborts.current(&why), Kind::kAbort);
  EXPECT_EQ(why.message(), "first");

  // From threads at once: whichever came first, one fail among them leaves a fail.
  for (int trial = 0; trial < 50; ++trial) {
    EndRequest raced;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&raced, t] {
        raced.request(Status(StatusCode::kTimeout, "thread " + std::to_string(t)),
                      t == 2 ? Kind::kFail : Kind::kAbort);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_TRUE(raced.pending());
    EXPECT_EQ(raced.current(&why), Kind::kFail);
    EXPECT_EQ(why.message().rfind("thread ", 0), 0u);
  }
}

}  // namespace
}  // namespace zen::cuda
