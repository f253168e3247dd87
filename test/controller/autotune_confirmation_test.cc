// controller/autotune_confirmation: the ABBA order and the rule that keeps a candidate, fed
// scores directly (parameter_manager_test drives it through whole tuning runs).

#include "controller/autotune_confirmation.h"

#include <gtest/gtest.h>

#include <vector>

namespace zen::controller {
namespace {

const TunedParameters kCandidate{8 << 20, 10.0};
const TunedParameters kIncumbent{128 << 20, 1.0};

// Feeds each pair's (candidate, incumbent) scores in the order the confirmation asks for them.
AutotuneConfirmation confirmed(const std::vector<std::pair<double, double>>& pairs) {
  AutotuneConfirmation c(kCandidate, kIncumbent, static_cast<int>(pairs.size()));
  for (const auto& [candidate, incumbent] : pairs) {
    for (int k = 0; k < 2; ++k) c.add(c.candidateNext() ? candidate : incumbent);
  }
  EXPECT_TRUE(c.complete());
  return c;
}

TEST(AutotuneConfirmation, AsksForTheCandidateAndTheIncumbentInABBAOrder) {
  AutotuneConfirmation c(kCandidate, kIncumbent, 3);
  std::vector<bool> order;
  for (int i = 0; i < 6; ++i) {
    order.push_back(c.candidateNext());
    EXPECT_EQ(c.next(), c.candidateNext() ? kCandidate : kIncumbent);
    c.add(1.0);
  }
  EXPECT_EQ(order, (std::vector<bool>{true, false, false, true, true, false}));
}

TEST(AutotuneConfirmation, KeepsACandidateThatWinsEveryPairBeyondTheMargin) {
  const AutotuneConfirmation c = confirmed({{105, 100}, {103, 100}, {108, 100}});
  EXPECT_EQ(c.ratios(), (std::vector<double>{1.05, 1.03, 1.08}));
  EXPECT_DOUBLE_EQ(c.medianRatio(), 1.05);
  EXPECT_EQ(c.kept(), kCandidate);
}

TEST(AutotuneConfirmation, ACandidateThatLosesOnePairIsNotKeptWhateverItsMedian) {
  // The word-level LM's pairs for a candidate that ran the configured values' very buckets.
  const AutotuneConfirmation c = confirmed({{102.4, 100}, {95.1, 100}, {146.9, 100}});
  EXPECT_GT(c.medianRatio(), 1 + AutotuneConfirmation::kConfirmMargin);
  EXPECT_EQ(c.kept(), kIncumbent);
}

TEST(AutotuneConfirmation, AMedianWithinTheMarginKeepsTheIncumbent) {
  EXPECT_EQ(confirmed({{100.5, 100}, {100.9, 100}, {100.2, 100}}).kept(), kIncumbent);
  EXPECT_EQ(confirmed({{101.5, 100}, {101.1, 100}}).kept(), kCandidate);  // median 1.013
}

TEST(AutotuneConfirmation, AnIncumbentThatMovedNothingLosesToOneThatDid) {
  const AutotuneConfirmation c = confirmed({{5, 0}, {7, 0}, {6, 0}});
  EXPECT_EQ(c.kept(), kCandidate);
  EXPECT_EQ(confirmed({{0, 0}, {0, 0}, {0, 0}}).kept(), kIncumbent);  // ratios 1: a tie
}

}  // namespace
}  // namespace zen::controller
