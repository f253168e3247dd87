// Stall inspector: Horovod's "Missing ranks" warning, rate limit, shutdown.

#include "controller/stall_inspector.h"

#include <gtest/gtest.h>

#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::at;
using testing::makeRequest;

TEST(StallInspector, SilentBeforeTheCheckTime) {
  MessageTable table(4);
  ASSERT_TRUE(table.add(makeRequest(0, "a"), at(0)).isOk());
  StallInspector inspector(StallOptions{60, 0});
  const auto report = inspector.check(table, at(59.9));
  EXPECT_TRUE(report.warning.empty());
  EXPECT_FALSE(report.shutdown);
  EXPECT_TRUE(report.missingRanks.empty());
}

TEST(StallInspector, NamesMissingRanksAndTheirTensors) {
  MessageTable table(4);
  for (int r : {0, 1, 2}) ASSERT_TRUE(table.add(makeRequest(r, "a"), at(0)).isOk());
  for (int r : {0, 1}) ASSERT_TRUE(table.add(makeRequest(r, "b"), at(1)).isOk());
  ASSERT_TRUE(table.add(makeRequest(1, "c"), at(100)).isOk());  // too recent to matter
  StallInspector inspector(StallOptions{60, 0});
  const auto report = inspector.check(table, at(70));
  EXPECT_EQ(report.missingRanks, (std::vector<int>{2, 3}));
  EXPECT_FALSE(report.shutdown);
  EXPECT_NE(report.warning.find("more than 60 seconds"), std::string::npos) << report.warning;
  EXPECT_NE(report.warning.find("longest: 'a', 70.0 s"), std::string::npos) << report.warning;
  EXPECT_NE(report.warning.find("Missing ranks:\n2: [b]\n3: [a, b]"), std::string::npos)
      << report.warning;
  EXPECT_EQ(report.warning.find("c]"), std::string::npos);
}

TEST(StallInspector, WarnsOncePerPeriodAndTruncatesLongLists) {
  MessageTable table(2);
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(table.add(makeRequest(0, "t" + std::to_string(i)), at(i)).isOk());
  }
  StallInspector inspector(StallOptions{10, 0});
  const auto first = inspector.check(table, at(30));
  EXPECT_NE(first.warning.find("1: [t0, t1, t2, t3, t4, t5 ... (+3 more)]"), std::string::npos)
      << first.warning;
  EXPECT_TRUE(inspector.check(table, at(35)).warning.empty());
  EXPECT_EQ(inspector.check(table, at(35)).missingRanks, std::vector<int>{1});
  EXPECT_FALSE(inspector.check(table, at(40)).warning.empty());
}

TEST(StallInspector, JoinedRanksAreNotMissing) {
  MessageTable table(3);
  ASSERT_TRUE(table.add(makeRequest(0, "a"), at(0)).isOk());
  ASSERT_TRUE(table.join(2).isOk());
  StallInspector inspector(StallOptions{60, 0});
  const auto report = inspector.check(table, at(61));
  EXPECT_EQ(report.missingRanks, std::vector<int>{1});
}

TEST(StallInspector, ShutsDownPastTheShutdownTime) {
  MessageTable table(3);
  ASSERT_TRUE(table.add(makeRequest(0, "old"), at(0)).isOk());
  ASSERT_TRUE(table.add(makeRequest(1, "old"), at(0)).isOk());
  ASSERT_TRUE(table.add(makeRequest(2, "new"), at(100)).isOk());
  StallInspector inspector(StallOptions{60, 120});
  EXPECT_FALSE(inspector.check(table, at(119)).shutdown);
  const auto report = inspector.check(table, at(170));
  EXPECT_TRUE(report.shutdown);
  EXPECT_FALSE(report.warning.empty());  // a shutdown is always explained
  EXPECT_NE(report.warning.find("\n2!: [old]"), std::string::npos) << report.warning;
  EXPECT_NE(report.warning.find("\n0: [new]"), std::string::npos) << report.warning;
  EXPECT_NE(report.warning.find("shutting down"), std::string::npos);
}

TEST(StallInspector, TheShutdownIsAnnouncedOnceThenThePeriodHolds) {
  MessageTable table(2);
  ASSERT_TRUE(table.add(makeRequest(0, "a"), at(0)).isOk());
  StallInspector inspector(StallOptions{60, 100});
  EXPECT_FALSE(inspector.check(table, at(90)).warning.empty());  // the first warning
  const auto first = inspector.check(table, at(100));  // within the period, but shutting down
  EXPECT_TRUE(first.shutdown);
  EXPECT_NE(first.warning.find("shutting down"), std::string::npos) << first.warning;
  for (int t = 101; t < 160; ++t) {  // the cycles while the job stops
    const auto later = inspector.check(table, at(t));
    EXPECT_TRUE(later.shutdown);
    EXPECT_TRUE(later.warning.empty()) << "at " << t << ": " << later.warning;
  }
  EXPECT_FALSE(inspector.check(table, at(160)).warning.empty());  // the period again
}

TEST(StallInspector, ZeroDisables) {
  MessageTable table(2);
  ASSERT_TRUE(table.add(makeRequest(0, "a"), at(0)).isOk());
  StallInspector inspector(StallOptions{0, 10});
  const auto report = inspector.check(table, at(1000));
  EXPECT_TRUE(report.warning.empty());
  EXPECT_FALSE(report.shutdown);
}

}  // namespace
}  // namespace zen::controller
