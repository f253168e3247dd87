// Rank 0's table: readiness, first-seen times, join, duplicates.

#include "controller/message_table.h"

#include <gtest/gtest.h>

#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::at;
using testing::makeRequest;

std::vector<std::string> names(const std::vector<std::pair<std::string, TableEntry>>& ready) {
  std::vector<std::string> out;
  for (const auto& kv : ready) out.push_back(kv.first);
  return out;
}

TEST(MessageTable, ReadyWhenEveryRankPostedSortedByName) {
  MessageTable table(3);
  ASSERT_TRUE(table.add(makeRequest(2, "b"), at(1)).isOk());
  ASSERT_TRUE(table.add(makeRequest(0, "b"), at(2)).isOk());
  ASSERT_TRUE(table.add(makeRequest(1, "a"), at(3)).isOk());
  EXPECT_TRUE(table.takeReady().empty());
  ASSERT_TRUE(table.add(makeRequest(1, "b"), at(4)).isOk());
  ASSERT_TRUE(table.add(makeRequest(0, "a"), at(4)).isOk());
  ASSERT_TRUE(table.add(makeRequest(2, "a"), at(4)).isOk());
  const auto ready = table.takeReady();
  EXPECT_EQ(names(ready), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ready[1].second.firstSeen, at(1));  // the first post, not the last
  EXPECT_EQ(ready[0].second.posted, 3);
  EXPECT_TRUE(table.empty());
  EXPECT_TRUE(table.takeReady().empty());
}

TEST(MessageTable, KeepsFirstSeenTimeForTheStallInspector) {
  MessageTable table(2);
  ASSERT_TRUE(table.add(makeRequest(1, "x"), at(5)).isOk());
  EXPECT_TRUE(table.takeReady().empty());
  EXPECT_EQ(table.entries().at("x").firstSeen, at(5));
  EXPECT_TRUE(table.entries().at("x").byRank[1].has_value());
  EXPECT_FALSE(table.entries().at("x").byRank[0].has_value());
}

TEST(MessageTable, JoinedRanksCountAsReady) {
  MessageTable table(3);
  ASSERT_TRUE(table.add(makeRequest(0, "w"), at(0)).isOk());
  ASSERT_TRUE(table.add(makeRequest(1, "w"), at(0)).isOk());
  EXPECT_TRUE(table.takeReady().empty());
  // Rank 2 joins: "w", which waited only for it, is ready without a new post.
  ASSERT_TRUE(table.join(2).isOk());
  EXPECT_EQ(names(table.takeReady()), std::vector<std::string>{"w"});
  EXPECT_TRUE(table.joined(2));
  EXPECT_EQ(table.joinedCount(), 1);
  EXPECT_FALSE(table.allJoined());

  ASSERT_TRUE(table.add(makeRequest(0, "v"), at(1)).isOk());
  EXPECT_TRUE(table.takeReady().empty());
  ASSERT_TRUE(table.join(1).isOk());
  ASSERT_TRUE(table.join(1).isOk());  // idempotent
  EXPECT_EQ(names(table.takeReady()), std::vector<std::string>{"v"});
  ASSERT_TRUE(table.join(0).isOk());
  EXPECT_TRUE(table.allJoined());
  EXPECT_EQ(table.lastJoinedRank(), 0);
  table.clearJoin();
  EXPECT_FALSE(table.joined(2));
  EXPECT_EQ(table.lastJoinedRank(), -1);
}

TEST(MessageTable, RecordsDuplicatesAndRejectsBadInput) {
  MessageTable table(2);
  ASSERT_TRUE(table.add(makeRequest(1, "x"), at(0)).isOk());
  ASSERT_TRUE(table.add(makeRequest(1, "x"), at(0)).isOk());
  EXPECT_EQ(table.entries().at("x").duplicateRanks, std::vector<int>{1});
  EXPECT_EQ(table.entries().at("x").posted, 1);
  EXPECT_FALSE(table.add(makeRequest(2, "x"), at(0)).isOk());
  EXPECT_FALSE(table.add(makeRequest(-1, "x"), at(0)).isOk());
  EXPECT_FALSE(table.add(makeRequest(0, kJoinTensorName, OpType::kJoin), at(0)).isOk());
  EXPECT_FALSE(table.join(5).isOk());
}

}  // namespace
}  // namespace zen::controller
