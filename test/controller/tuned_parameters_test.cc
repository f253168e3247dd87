// The autotuner's parameters in the negotiation: rank 0 forces a slow path to send them, every
// rank switches when it finishes that plan, and the fast path then fuses with the new
// threshold identically everywhere (SimCluster checks the ranks' fast plans are equal).
#include <gtest/gtest.h>

#include "test/controller/sim_cluster.h"

namespace zen::controller::testing {
namespace {

void postStep(SimCluster& cluster) {
  for (int r = 0; r < cluster.size(); ++r) {
    for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(cluster.post(makeRequest(r, name)).isOk());
  }
}

TEST(TunedParameters, APlanCarriesThemAndEveryRankSwitchesTheFastPathFusion) {
  SimOptions options;
  options.fusionThresholdBytes = 0;  // one response per tensor
  SimCluster cluster(3, options);
  postStep(cluster);
  CycleOutcome first = cluster.cycle();
  EXPECT_EQ(first.path, CyclePath::kSlow);
  EXPECT_EQ(first.plans[0].responses.size(), 3u);
  EXPECT_FALSE(first.plans[0].parameters.has_value());
  postStep(cluster);
  CycleOutcome cached = cluster.cycle();
  ASSERT_EQ(cached.path, CyclePath::kFast);
  EXPECT_EQ(cached.plans[0].responses.size(), 3u);

  // Nothing is queued, yet rank 0's parameters force the slow path to carry them.
  const TunedParameters tuned{int64_t{1} << 20, 2.5};
  cluster.sendParameters(tuned);
  CycleOutcome sent = cluster.cycle();
  EXPECT_EQ(sent.path, CyclePath::kSlow);
  EXPECT_EQ(sent.requestsSent, 0u);
  for (int r = 0; r < cluster.size(); ++r) {
    ASSERT_TRUE(sent.plans[r].parameters.has_value()) << "rank " << r;
    EXPECT_EQ(*sent.plans[r].parameters, tuned);
    EXPECT_TRUE(sent.plans[r].responses.empty());
    EXPECT_EQ(cluster.rank(r).fusionThresholdBytes(), int64_t{1} << 20) << "rank " << r;
  }

  // The fast path fuses the three 64-byte tensors now, on every rank alike.
  postStep(cluster);
  CycleOutcome fused = cluster.cycle();
  ASSERT_EQ(fused.path, CyclePath::kFast);
  ASSERT_EQ(fused.plans[0].responses.size(), 1u);
  EXPECT_EQ(namesOf(fused.plans[0]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(fused.plans[0].parameters.has_value());

  // And so does rank 0's slow path, for new names.
  for (int r = 0; r < cluster.size(); ++r) {
    for (const char* name : {"d", "e"}) ASSERT_TRUE(cluster.post(makeRequest(r, name)).isOk());
  }
  CycleOutcome fresh = cluster.cycle();
  ASSERT_EQ(fresh.path, CyclePath::kSlow);
  ASSERT_EQ(fresh.plans[0].responses.size(), 1u);
  EXPECT_EQ(namesOf(fresh.plans[0]), (std::vector<std::string>{"d", "e"}));
}

}  // namespace
}  // namespace zen::controller::testing
