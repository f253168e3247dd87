// ZEN_SCHEME=auto's profiler (ops/auto_scheme.h) on in-process ranks: the alternation, the
// agreed choice from times that differ per rank, and its bounds. The executor's use of it is
// checked end to end in test/runtime (runtime_callbacks_test, runtime_steps_test).
#include "ops/auto_scheme.h"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "test/ops/transport_harness.h"

namespace zen::ops::testing {
namespace {

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

// Each rank's fastest zen and hc times differ; the sums over ranks decide, identically.
void expectAgreedChoice(double zenBias, Scheme want) {
  constexpr int kRanks = 4;
  constexpr int kCalls = 2;
  std::mutex mu;
  std::vector<Scheme> chosen;
  runRanks({Backend::kInProcess, kRanks}, {}, [&](Transport& t) {
    AutoScheme as(kCalls);
    const std::string k = AutoScheme::key(bucket({"emb"}, 1000));
    const Scheme order[] = {Scheme::kZen, Scheme::kHc, Scheme::kZen, Scheme::kHc};
    for (int call = 0; call < 2 * kCalls; ++call) {
      ASSERT_EQ(as.next(k), order[call]) << "call " << call;
      EXPECT_FALSE(as.chosen(k).has_value());
      // Rank 0 sees zen much faster; the others see hc a little faster. The first call of
      // each scheme is slow (allocation) and must not count.
      const bool zen = order[call] == Scheme::kZen;
      double s = zen ? 1.0 + zenBias : 1.0;
      if (t.rank() == 0) s = zen ? 0.1 : 1.0;
      if (call < 2) s += 100.0;
      ASSERT_TRUE(as.record(k, order[call], s, t).isOk());
    }
    ASSERT_TRUE(as.chosen(k).has_value());
    EXPECT_EQ(as.next(k), *as.chosen(k));
    std::lock_guard<std::mutex> lock(mu);
    chosen.push_back(*as.chosen(k));
  });
  ASSERT_EQ(chosen.size(), size_t{kRanks});
  for (Scheme s : chosen) EXPECT_EQ(s, want);
}

TEST(AutoScheme, AgreedChoiceFollowsTheSummedTimes) {
  // zen: 0.1 + 3 x (1 + bias); hc: 4 x 1.0.
  expectAgreedChoice(0.2, Scheme::kZen);  // 3.7 < 4
  expectAgreedChoice(0.4, Scheme::kHc);   // 4.3 > 4
}

TEST(AutoScheme, ZeroProfileCallsIsZenAndSingleRankNeverProfiles) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as(0);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(as.next("k"), Scheme::kZen);
      EXPECT_TRUE(as.record("k", Scheme::kZen, 1.0, t).isOk());
    }
    EXPECT_FALSE(as.chosen("k").has_value());
  });
  runRanks({Backend::kInProcess, 1}, {}, [&](Transport& t) {
    AutoScheme as(1);
    EXPECT_TRUE(as.record("k", Scheme::kZen, 1.0, t).isOk());
    EXPECT_EQ(as.next("k"), Scheme::kZen);
  });
}

TEST(AutoScheme, RecordingAnotherSchemeThanPlannedIsAnError) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as(2);
    Status s = as.record("k", Scheme::kHc, 1.0, t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("expected zen"), std::string::npos) << s.message();
  });
}

TEST(AutoScheme, SignaturesBeyondTheBoundRunZen) {
  runRanks({Backend::kInProcess, 2}, {}, [&](Transport& t) {
    AutoScheme as(1, /*maxKeys=*/1);
    ASSERT_TRUE(as.record("a", Scheme::kZen, 1.0, t).isOk());
    ASSERT_TRUE(as.record("a", Scheme::kHc, t.rank() == 0 ? 0.1 : 0.2, t).isOk());
    EXPECT_EQ(as.chosen("a"), Scheme::kHc);  // 0.3 < 2.0
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(as.next("b"), Scheme::kZen);
      ASSERT_TRUE(as.record("b", Scheme::kZen, 1.0, t).isOk());
    }
    EXPECT_FALSE(as.chosen("b").has_value());
  });
}

}  // namespace
}  // namespace zen::ops::testing
