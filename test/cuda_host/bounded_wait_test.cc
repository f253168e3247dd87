// The bounded wait behind every host wait on the GPU path (cuda/bounded_wait.h), with fake
// queries standing in for cudaStreamQuery: done at once, done after some polls, never done
// (kTimeout within the bound, without burning a core), and a failing query.
#include "cuda/bounded_wait.h"

#include <gtest/gtest.h>

#include <chrono>

namespace zen::cuda {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(PollUntil, DoneAtOnceLooksOnce) {
  int calls = 0;
  const Status s = pollUntil(
      [&](Status*) {
        ++calls;
        return PollState::kDone;
      },
      5.0, "the count");
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(calls, 1);
}

TEST(PollUntil, DoneAfterSomePolls) {
  int calls = 0;
  const Status s =
      pollUntil([&](Status*) { return ++calls < 50 ? PollState::kPending : PollState::kDone; }, 5.0,
                "the count");
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(calls, 50);
}

TEST(PollUntil, NeverDoneTimesOutWithinTheBoundNamingTheWait) {
  int calls = 0;
  const auto start = std::chrono::steady_clock::now();
  const Status s = pollUntil(
      [&](Status*) {
        ++calls;
        return PollState::kPending;
      },
      0.2, "the GPU encode's set-bit count");
  const double waited = secondsSince(start);
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(), "the GPU encode's set-bit count did not complete within 0.2 s");
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 10.0);  // bounded, generously: a loaded machine stalls threads for seconds
  // Backs off to sleeps of 1 ms: a few hundred looks, not a spinning core's millions.
  EXPECT_LT(calls, 20000);
}

TEST(PollUntil, ZeroAndNegativeTimeoutsLookOnce) {
  for (double timeout : {0.0, -1.0}) {
    int calls = 0;
    const Status s = pollUntil(
        [&](Status*) {
          ++calls;
          return PollState::kPending;
        },
        timeout, "x");
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << timeout;
    EXPECT_EQ(calls, 1) << timeout;
  }
}

TEST(PollUntil, AFailingQueryEndsTheWaitWithItsError) {
  int calls = 0;
  const Status s = pollUntil(
      [&](Status* failure) {
        if (++calls < 3) return PollState::kPending;
        *failure = ZEN_ERROR(StatusCode::kInternal, "cudaStreamQuery failed: an illegal address");
        return PollState::kFailed;
      },
      5.0, "the count");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "cudaStreamQuery failed: an illegal address");
  EXPECT_EQ(calls, 3);
}

TEST(PollUntil, AFailureWithoutDetailNamesTheWait) {
  const Status s = pollUntil([](Status*) { return PollState::kFailed; }, 5.0, "the verdict");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "the verdict failed (no detail)");
}

}  // namespace
}  // namespace zen::cuda
