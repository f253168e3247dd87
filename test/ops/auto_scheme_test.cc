// ZEN_SCHEME=auto's profiler (ops/auto_scheme.h) on in-process ranks: the round-robin over the
// candidates, the agreed choice from times that differ per rank, ties, its bounds, and
// ZEN_AUTO_SCHEMES. The executor's use of it is checked end to end in test/runtime
// (runtime_callbacks_test: every call's result against the dense reference, runtime_steps_test).
#include "ops/auto_scheme.h"

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <vector>

#include "ops/sparse_allreduce.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

constexpr Scheme kZen = Scheme::kZen;
constexpr Scheme kHc = Scheme::kHc;
constexpr Scheme kAg = Scheme::kAgSparse;

Response bucket(std::vector<std::string> names, int64_t rows) {
  Response r;
  r.type = ResponseType::kSparseAllreduce;
  r.tensorNames = std::move(names);
  r.totalRows = rows;
  return r;
}

TEST(AutoScheme, KeyNamesTheBucket) {
  EXPECT_EQ(AutoScheme::key(bucket({"a", "b"}, 10)), AutoScheme::key(bucket({"a", "b"}, 10)));
  EXPECT_NE(AutoScheme::key(bucket({"a", "b"}, 10)), AutoScheme::key(bucket({"ab"}, 10)));
  EXPECT_NE(AutoScheme::key(bucket({"a"}, 10)), AutoScheme::key(bucket({"a"}, 11)));
}

// Seconds of one profiling call on a rank: (rank, candidate index).
using Timing = std::function<double(int rank, size_t candidate)>;

// Profiles one bucket on 4 ranks, P = 2: checks the round-robin order and that nothing is
// chosen before the last call, then returns the choice, which every rank must share. The
// first call of each candidate is 100 s slower (allocation) and must not count.
Scheme profileAndAgree(const std::vector<Scheme>& candidates, const Timing& seconds) {
  constexpr int kRanks = 4;
  constexpr int kCalls = 2;
  std::mutex mu;
  std::vector<Scheme> chosen;
  runRanks({Backend::kInProcess, kRanks}, {}, [&](Transport& t) {
    AutoScheme as(candidates, kCalls);
    const std::string k = AutoScheme::key(bucket({"emb"}, 1000));
    const size_t calls = candidates.size() * kCalls;
    for (size_t call = 0; call < calls; ++call) {
      const size_t c = call % candidates.size();
      ASSERT_EQ(as.next(k), candidates[c]) << "call " << call;
      EXPECT_FALSE(as.chosen(k).has_value()) << "call " << call;
      const double s = seconds(t.rank(), c) + (call < candidates.size() ? 100.0 : 0.0);
      ASSERT_TRUE(as.record(k, candidates[c], s, t).isOk());
    }
    ASSERT_TRUE(as.chosen(k).has_value());
    for (int i = 0; i < 3; ++i) {  // kept for every later call
      EXPECT_EQ(as.next(k), *as.chosen(k));
      ASSERT_TRUE(as.record(k, *as.chosen(k), 0.0, t).isOk());
    }
    std::lock_guard<std::mutex> lock(mu);
    chosen.push_back(*as.chosen(k));
  });
  EXPECT_EQ(chosen.size(), size_t{kRanks});
  for (Scheme s : chosen) EXPECT_EQ(s, chosen.front()) << "the ranks disagree";
  return chosen.empty() ? Scheme::kAuto : chosen.front();
}

// Rank 0 sees r0[c], the other three others[c] (binary fractions: the sums are exact).
Timing table(std::vector<double> r0, std::vector<double> others) {
  return [r0, others](int rank, size_t c) { return rank == 0 ? r0[c] : others[c]; };
}

TEST(AutoScheme, AgreedChoiceFollowsTheSummedTimes) {
  const std::vector<Scheme> all = {kZen, kHc, kAg};
  // Sums over ranks (zen, hc, agsparse):
  EXPECT_EQ(profileAndAgree(all, table({0.25, 1, 1}, {1, 1.25, 1.5})), kZen);  // 3.25 4.75 5.5
  EXPECT_EQ(profileAndAgree(all, table({0.25, 1, 1}, {1.5, 1, 1.25})), kHc);   // 4.75 4 4.75
  // agsparse wins although three ranks see zen fastest: 4, 4.75, 3.875.
  EXPECT_EQ(profileAndAgree(all, table({1, 1, 0.5}, {1, 1.25, 1.125})), kAg);
  // Two candidates, as the paper's auto.
  EXPECT_EQ(profileAndAgree({kZen, kHc}, table({0.125, 1}, {1.25, 1})), kZen);  // 3.875 4
  EXPECT_EQ(profileAndAgree({kZen, kHc}, table({0.125, 1}, {1.5, 1})), kHc);    // 4.625 4
}

TEST(AutoScheme, TiesGoToTheEarlierCandidate) {
  const Timing same = [](int, size_t) { return 1.0; };
  EXPECT_EQ(profileAndAgree({kZen, kHc, kAg}, same), kZen);
  EXPECT_EQ(profileAndAgree({kAg, kHc, kZen}, same), kAg);
  EXPECT_EQ(profileAndAgree({kZen, kHc, kAg}, table({2, 1, 1}, {2, 1, 1})), kHc);
  EXPECT_EQ(profileAndAgree({kZen, kAg, kHc}, table({2, 1, 1}, {2, 1, 1})), kAg);
}

TEST(AutoScheme, ZeroProfileCallsOrOneCandidateRunsTheFirstUnprofiled) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme zero({kHc, kZen, kAg}, 0);
    AutoScheme one({kAg}, 3);
    AutoScheme none({}, 3);  // no candidates: zen
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(zero.next("k"), kHc);
      EXPECT_TRUE(zero.record("k", kHc, 1.0, t).isOk());
      EXPECT_EQ(one.next("k"), kAg);
      EXPECT_TRUE(one.record("k", kAg, 1.0, t).isOk());
      EXPECT_EQ(none.next("k"), kZen);
      EXPECT_TRUE(none.record("k", kZen, 1.0, t).isOk());
    }
    EXPECT_FALSE(zero.chosen("k").has_value());
    EXPECT_FALSE(one.chosen("k").has_value());
    EXPECT_FALSE(none.chosen("k").has_value());
  });
}

TEST(AutoScheme, SingleRankNeverProfiles) {
  runRanks({Backend::kInProcess, 1}, {}, [&](Transport& t) {
    AutoScheme as({kZen, kHc, kAg}, 1);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(as.next("k"), kZen);
      EXPECT_TRUE(as.record("k", kZen, 1.0, t).isOk());
    }
    EXPECT_FALSE(as.chosen("k").has_value());
  });
}

TEST(AutoScheme, RecordingAnotherSchemeThanPlannedIsAnError) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as({kZen, kHc, kAg}, 2);
    Status s = as.record("k", kHc, 1.0, t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("call 0 of a bucket ran hc, expected zen"), std::string::npos)
        << s.message();
    ASSERT_TRUE(as.record("k", kZen, 1.0, t).isOk());
    ASSERT_TRUE(as.record("k", kHc, 1.0, t).isOk());
    s = as.record("k", kZen, 1.0, t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("call 2 of a bucket ran zen, expected agsparse"), std::string::npos)
        << s.message();
  });
}

TEST(AutoScheme, ACallThatExchangedNoRowsIsNoSample) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as({kZen, kHc}, 1);
    SyncStats stats;
    stats.scheme = kHc;  // not the planned zen: would be an error as a sample
    stats.seconds = 1.0;
    ASSERT_TRUE(as.record("k", stats, t).isOk());
    EXPECT_EQ(as.next("k"), kZen);
    stats.totalNnz = 1;
    const Status s = as.record("k", stats, t);
    EXPECT_NE(s.message().find("call 0 of a bucket ran hc, expected zen"), std::string::npos)
        << s.message();
    stats.scheme = kZen;
    ASSERT_TRUE(as.record("k", stats, t).isOk());
    EXPECT_EQ(as.next("k"), kHc);
  });
}

TEST(AutoScheme, SignaturesBeyondTheBoundRunTheFirstCandidate) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as({kZen, kAg}, 1, /*maxKeys=*/1);
    ASSERT_TRUE(as.record("a", kZen, 1.0, t).isOk());
    ASSERT_TRUE(as.record("a", kAg, t.rank() == 0 ? 0.125 : 0.25, t).isOk());
    EXPECT_EQ(as.chosen("a"), kAg);  // 0.375 < 2
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(as.next("b"), kZen);
      ASSERT_TRUE(as.record("b", kZen, 1.0, t).isOk());
    }
    EXPECT_FALSE(as.chosen("b").has_value());
  });
}

TEST(AutoScheme, ConfigNamesTheCandidates) {
  auto c = Config::parse({});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().autoSchemes, (std::vector<Scheme>{kZen, kHc, kAg}));
  c = Config::parse({{"ZEN_AUTO_SCHEMES", "agsparse,zen"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().autoSchemes, (std::vector<Scheme>{kAg, kZen}));
  c = Config::parse({{"ZEN_AUTO_SCHEMES", "hc"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().autoSchemes, (std::vector<Scheme>{kHc}));

  const std::pair<const char*, const char*> bad[] = {
      {"zen,omni",
       "'omni' is not a candidate (expected a comma-separated list of zen, hc, "
       "agsparse)"},
      {"zen,dense", "'dense' is not a candidate"},
      {"blocks", "'blocks' is not a candidate"},
      {"auto", "'auto' is not a candidate"},
      {"", "ZEN_AUTO_SCHEMES='': '' is not a candidate"},
      {"zen,,hc", "'' is not a candidate"},
      {"zen,hc,", "'' is not a candidate"},
      {"Zen", "'Zen' is not a candidate"},
      {"hc,zen,hc", "ZEN_AUTO_SCHEMES='hc,zen,hc': hc is listed twice"},
  };
  for (const auto& [value, expect] : bad) {
    c = Config::parse({{"ZEN_AUTO_SCHEMES", value}});
    ASSERT_FALSE(c.isOk()) << value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << value;
    EXPECT_NE(c.status().message().find(expect), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace zen::ops::testing
