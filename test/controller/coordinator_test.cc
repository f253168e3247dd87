// The whole negotiation with n simulated ranks (sim_cluster.h): order, errors, fusion, the
// cache fast path, join, stalls and shutdown, as the background loop will see them.

#include "controller/coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::at;
using testing::CycleOutcome;
using testing::makeRequest;
using testing::namesOf;
using testing::SimCluster;
using testing::SimOptions;
using testing::sparseRequest;

std::vector<std::string> tensorNames(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("layer" + std::to_string(i) + ".grad");
  return names;
}

// Every rank posts every name, each rank in its own order.
void postShuffled(SimCluster& sim, const std::vector<std::string>& names, std::mt19937& rng) {
  for (int r = 0; r < sim.size(); ++r) {
    auto mine = names;
    std::shuffle(mine.begin(), mine.end(), rng);
    for (const auto& n : mine) ASSERT_TRUE(sim.post(makeRequest(r, n)).isOk());
  }
}

void expectSamePlanEverywhere(const CycleOutcome& c) {
  for (size_t r = 1; r < c.plans.size(); ++r) EXPECT_EQ(c.plans[r], c.plans[0]) << "rank " << r;
}

TEST(Coordinator, GlobalOrderDoesNotDependOnPostingOrder) {
  std::mt19937 rng(3);
  SimOptions opt;
  opt.fusionThresholdBytes = 0;  // one response per tensor, to see the order
  for (int trial = 0; trial < 5; ++trial) {
    SimCluster sim(4, opt);
    const auto names = tensorNames(20);
    // Half the names reach every rank in the first cycle; rank 3 posts the rest later.
    for (int r = 0; r < 4; ++r) {
      auto mine = names;
      std::shuffle(mine.begin(), mine.end(), rng);
      for (const auto& n : mine) {
        const bool early = std::stoi(n.substr(5)) % 2 == 0;
        if (r != 3 || early) {
          ASSERT_TRUE(sim.post(makeRequest(r, n)).isOk());
        }
      }
    }
    const CycleOutcome first = sim.cycle(at(0));
    expectSamePlanEverywhere(first);
    std::vector<std::string> expected;
    for (const auto& n : names) {
      if (std::stoi(n.substr(5)) % 2 == 0) expected.push_back(n);
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(namesOf(first.plans[0]), expected);

    for (const auto& n : names) {
      if (std::stoi(n.substr(5)) % 2 == 1) {
        ASSERT_TRUE(sim.post(makeRequest(3, n)).isOk());
      }
    }
    const CycleOutcome second = sim.cycle(at(1));
    expectSamePlanEverywhere(second);
    const auto secondNames = namesOf(second.plans[0]);
    EXPECT_EQ(secondNames.size(), 10u);
    EXPECT_TRUE(std::is_sorted(secondNames.begin(), secondNames.end()));
    for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  }
}

TEST(Coordinator, ValidationErrorsReachEveryRank) {
  SimCluster sim(3, SimOptions{});
  for (int r = 0; r < 3; ++r) {
    const DataType dtype = r == 2 ? DataType::kFloat16 : DataType::kFloat32;
    ASSERT_TRUE(sim.post(makeRequest(r, "emb.weight", OpType::kAllreduce, dtype)).isOk());
    ASSERT_TRUE(sim.post(makeRequest(r, "fine")).isOk());
  }
  const CycleOutcome c = sim.cycle(at(0));
  expectSamePlanEverywhere(c);
  for (const auto& plan : c.plans) {
    const Response* error = nullptr;
    const Response* fine = nullptr;
    for (const auto& resp : plan.responses) {
      if (resp.type == ResponseType::kError) error = &resp;
      if (resp.tensorNames == std::vector<std::string>{"fine"}) fine = &resp;
    }
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(error->tensorNames, std::vector<std::string>{"emb.weight"});
    EXPECT_EQ(error->errorMessage,
              "tensor 'emb.weight': rank 2 sent dtype float16, ranks 0-1 float32");
    ASSERT_NE(fine, nullptr);
    EXPECT_EQ(fine->type, ResponseType::kAllreduce);
  }
  // The failed name is no longer in flight and is not cached: it can be posted again, fixed.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(sim.rank(r).inFlight(), 0u);
    ASSERT_TRUE(sim.post(makeRequest(r, "emb.weight")).isOk());
  }
  const CycleOutcome again = sim.cycle(at(1));
  ASSERT_EQ(again.plans[0].responses.size(), 1u);
  EXPECT_EQ(again.plans[0].responses[0].type, ResponseType::kAllreduce);
}

TEST(Coordinator, DuplicateInFlightNameIsRejectedAtPost) {
  SimCluster sim(2, SimOptions{});
  ASSERT_TRUE(sim.post(makeRequest(0, "x")).isOk());
  const Status dup = sim.post(makeRequest(0, "x"));
  ASSERT_FALSE(dup.isOk());
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("tensor 'x' is already in flight on rank 0"), std::string::npos);
  sim.cycle(at(0));  // rank 1 has not posted: still in flight
  EXPECT_FALSE(sim.post(makeRequest(0, "x")).isOk());
  ASSERT_TRUE(sim.post(makeRequest(1, "x")).isOk());
  sim.cycle(at(1));
  EXPECT_TRUE(sim.post(makeRequest(0, "x")).isOk());  // completed: may be posted again
}

TEST(Coordinator, DuplicateReachingTheTableFailsOnEveryRank) {
  // A misbehaving peer (no TensorQueue check) sends the same name twice.
  Coordinator coord(CoordinatorOptions{2});
  std::vector<RequestList> lists(2);
  lists[0].requests = {makeRequest(0, "x")};
  lists[1].requests = {makeRequest(1, "x"), makeRequest(1, "x")};
  const ResponseList plan = coord.computeResponses(lists, at(0));
  ASSERT_EQ(plan.responses.size(), 1u);
  EXPECT_EQ(plan.responses[0].type, ResponseType::kError);
  EXPECT_NE(plan.responses[0].errorMessage.find("rank 1 posted it again"), std::string::npos);
}

TEST(Coordinator, FusionMakesFewBucketsOfManySmallTensors) {
  SimOptions opt;
  opt.fusionThresholdBytes = 64 << 10;  // 64 KiB
  SimCluster sim(4, opt);
  std::mt19937 rng(5);
  postShuffled(sim, tensorNames(500), rng);  // 500 x 64 B
  const CycleOutcome c = sim.cycle(at(0));
  expectSamePlanEverywhere(c);
  EXPECT_EQ(c.plans[0].responses.size(), 1u);
  EXPECT_EQ(namesOf(c.plans[0]).size(), 500u);
}

TEST(Coordinator, SteadyStateTakesTheCacheFastPath) {
  SimCluster sim(4, SimOptions{});
  std::mt19937 rng(9);
  const auto names = tensorNames(50);
  postShuffled(sim, names, rng);
  const CycleOutcome first = sim.cycle(at(0));
  EXPECT_EQ(first.path, CyclePath::kSlow);
  EXPECT_EQ(first.requestsSent, 200u);
  const auto firstNames = namesOf(first.plans[0]);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(sim.cacheBits(r), sim.cacheBits(0));
  EXPECT_EQ(sim.cacheBits(0).size(), 50u);

  for (int step = 1; step <= 10; ++step) {
    postShuffled(sim, names, rng);
    const CycleOutcome c = sim.cycle(at(step));
    EXPECT_EQ(c.path, CyclePath::kFast) << "step " << step;
    EXPECT_EQ(c.requestsSent, 0u);
    auto got = namesOf(c.plans[0]);
    EXPECT_EQ(got.size(), 50u);
    std::sort(got.begin(), got.end());
    auto want = names;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  }
  // Idle cycles cost the AND only.
  EXPECT_EQ(sim.cycle(at(20)).path, CyclePath::kFast);
}

TEST(Coordinator, SparseTensorsStayCachedWhateverTheirNnz) {
  // nnz is not in a Request at all; the dense shape is, and it does not change.
  SimCluster sim(3, SimOptions{});
  for (int step = 0; step < 5; ++step) {
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(sim.post(sparseRequest(r, "emb", 100000, 64)).isOk());
      ASSERT_TRUE(sim.post(sparseRequest(r, "emb2", 1000, 64)).isOk());
    }
    const CycleOutcome c = sim.cycle(at(step));
    EXPECT_EQ(c.path, step == 0 ? CyclePath::kSlow : CyclePath::kFast);
    ASSERT_EQ(c.plans[0].responses.size(), 1u);  // one fused sparse bucket
    const Response& bucket = c.plans[0].responses[0];
    EXPECT_EQ(bucket.type, ResponseType::kSparseAllreduce);
    EXPECT_EQ(bucket.totalRows, 101000);
    EXPECT_EQ(bucket.rowOffsets.size(), 2u);
  }
}

TEST(Coordinator, ChangedTensorIsRenegotiatedOnEveryRank) {
  SimCluster sim(3, SimOptions{});
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(sim.post(makeRequest(r, "w")).isOk());
  sim.cycle(at(0));
  // Rank 1 is early and still hits; ranks 0 and 2 changed the shape (stale entry).
  ASSERT_TRUE(sim.post(makeRequest(1, "w")).isOk());
  EXPECT_EQ(sim.cycle(at(1)).path, CyclePath::kFast);  // waiting for the others
  for (int r : {0, 2}) {
    ASSERT_TRUE(sim.post(makeRequest(r, "w", OpType::kAllreduce, DataType::kFloat32, {8})).isOk());
  }
  const CycleOutcome c = sim.cycle(at(2));
  EXPECT_EQ(c.path, CyclePath::kSlow);
  EXPECT_EQ(c.requestsSent, 3u);  // rank 1's hit went along as soon as the entry was dropped
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  EXPECT_EQ(c.plans[0].responses[0].type, ResponseType::kError);
  EXPECT_EQ(c.plans[0].responses[0].errorMessage,
            "tensor 'w': rank 1 sent dense shape [4, 4], ranks 0, 2 [8]");
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(sim.cacheBits(r).empty());
    EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  }
}

TEST(Coordinator, JoinWithSparseTensors) {
  SimCluster sim(4, SimOptions{});
  // Warm the cache so the join window also exercises cached names.
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(sparseRequest(r, "emb", 5000, 32)).isOk());
  sim.cycle(at(0));

  // Rank 2 runs out of data and joins; the others go on with sparse gradients.
  ASSERT_TRUE(sim.post(makeRequest(2, kJoinTensorName, OpType::kJoin)).isOk());
  EXPECT_FALSE(sim.post(sparseRequest(2, "emb", 5000, 32)).isOk());  // joined: no more posts
  for (int r : {0, 1, 3}) ASSERT_TRUE(sim.post(sparseRequest(r, "emb", 5000, 32)).isOk());
  for (int r : {0, 1, 3}) ASSERT_TRUE(sim.post(sparseRequest(r, "emb.new", 70, 32)).isOk());
  const CycleOutcome c = sim.cycle(at(1));
  EXPECT_EQ(c.path, CyclePath::kSlow);
  expectSamePlanEverywhere(c);
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  const Response& bucket = c.plans[0].responses[0];
  ASSERT_EQ(bucket.type, ResponseType::kSparseAllreduce) << bucket.errorMessage;
  EXPECT_EQ(bucket.tensorNames, (std::vector<std::string>{"emb", "emb.new"}));
  EXPECT_EQ(bucket.rowOffsets, (std::vector<int64_t>{0, 5000}));
  EXPECT_EQ(bucket.totalRows, 5070);
  EXPECT_TRUE(sim.rank(2).joined());

  // The others join one by one; the last one completes the join everywhere.
  ASSERT_TRUE(sim.post(makeRequest(0, kJoinTensorName, OpType::kJoin)).isOk());
  ASSERT_TRUE(sim.post(makeRequest(3, kJoinTensorName, OpType::kJoin)).isOk());
  ASSERT_TRUE(sim.post(sparseRequest(1, "emb", 5000, 32)).isOk());
  const CycleOutcome late = sim.cycle(at(2));
  ASSERT_EQ(late.plans[0].responses.size(), 1u);  // only rank 1 is left: its tensor completes
  EXPECT_EQ(late.plans[0].responses[0].type, ResponseType::kSparseAllreduce);
  ASSERT_TRUE(sim.post(makeRequest(1, kJoinTensorName, OpType::kJoin)).isOk());
  const CycleOutcome done = sim.cycle(at(3));
  expectSamePlanEverywhere(done);
  ASSERT_EQ(done.plans[0].responses.size(), 1u);  // no phantom collectives of cached names
  EXPECT_EQ(done.plans[0].responses[0].type, ResponseType::kJoin);
  EXPECT_EQ(done.plans[0].responses[0].lastJoinedRank, 1);
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(sim.rank(r).joined());
    EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  }
  for (int r = 1; r < 4; ++r) EXPECT_EQ(sim.cacheBits(r), sim.cacheBits(0));

  // After the join, the next epoch is back on the fast path.
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(sparseRequest(r, "emb", 5000, 32)).isOk());
  EXPECT_EQ(sim.cycle(at(4)).path, CyclePath::kFast);
}

TEST(Coordinator, StallWarningNamesTheStalledRank) {
  SimCluster sim(4, SimOptions{});
  for (int r : {0, 1, 2}) ASSERT_TRUE(sim.post(makeRequest(r, "a"), at(0)).isOk());
  EXPECT_TRUE(sim.cycle(at(0)).stallWarning.empty());
  EXPECT_TRUE(sim.cycle(at(30)).stallWarning.empty());
  const CycleOutcome c = sim.cycle(at(61));
  EXPECT_NE(c.stallWarning.find("Missing ranks:\n3: [a]"), std::string::npos) << c.stallWarning;
  EXPECT_FALSE(c.plans[0].shutdown);
}

TEST(Coordinator, StallOfACachedTensorIsAttributedToo) {
  SimCluster sim(3, SimOptions{});
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(sim.post(makeRequest(r, "a"), at(0)).isOk());
  sim.cycle(at(0));
  // Next step rank 1 never posts "a": the others' cache hits wait, invisible to rank 0...
  for (int r : {0, 2}) ASSERT_TRUE(sim.post(makeRequest(r, "a"), at(1)).isOk());
  EXPECT_EQ(sim.cycle(at(1)).path, CyclePath::kFast);
  // ...until the check time, when they are renegotiated through rank 0's table...
  const CycleOutcome moved = sim.cycle(at(62));
  EXPECT_EQ(moved.path, CyclePath::kSlow);
  EXPECT_EQ(moved.requestsSent, 2u);
  // ...whose inspector then names rank 1.
  const CycleOutcome warned = sim.cycle(at(123));
  EXPECT_NE(warned.stallWarning.find("Missing ranks:\n1: [a]"), std::string::npos)
      << warned.stallWarning;
}

TEST(Coordinator, ShutdownPropagatesOnBothPaths) {
  for (int capacity : {1024, 0}) {
    SimOptions opt;
    opt.cacheCapacity = capacity;
    SimCluster sim(3, opt);
    EXPECT_FALSE(sim.cycle(at(0)).plans[0].shutdown);
    const CycleOutcome c = sim.cycle(at(1), {2});
    for (const auto& plan : c.plans) EXPECT_TRUE(plan.shutdown) << "capacity " << capacity;
    // With pending requests (slow path) too.
    ASSERT_TRUE(sim.post(makeRequest(0, "x")).isOk());
    const CycleOutcome slow = sim.cycle(at(2), {1});
    EXPECT_EQ(slow.path, CyclePath::kSlow);
    for (const auto& plan : slow.plans) EXPECT_TRUE(plan.shutdown);
  }
}

TEST(Coordinator, StallShutdownStopsEveryRank) {
  SimOptions opt;
  opt.stallCheckSeconds = 10;
  opt.stallShutdownSeconds = 30;
  SimCluster sim(2, opt);
  ASSERT_TRUE(sim.post(makeRequest(0, "a")).isOk());
  EXPECT_FALSE(sim.cycle(at(0)).plans[0].shutdown);
  const CycleOutcome warned = sim.cycle(at(20));  // fast path: rank 0 inspects anyway
  EXPECT_EQ(warned.path, CyclePath::kFast);
  EXPECT_NE(warned.stallWarning.find("1: [a]"), std::string::npos) << warned.stallWarning;
  EXPECT_FALSE(warned.plans[1].shutdown);
  const CycleOutcome stalled = sim.cycle(at(31));
  EXPECT_NE(stalled.stallWarning.find("1!: [a]"), std::string::npos) << stalled.stallWarning;
  // Rank 0's shutdown bit carries the decision to every rank in the next cycle.
  const CycleOutcome next = sim.cycle(at(32));
  for (const auto& plan : next.plans) EXPECT_TRUE(plan.shutdown);
  // On the slow path the ResponseList says so directly.
  ASSERT_TRUE(sim.post(makeRequest(1, "b")).isOk());
  const CycleOutcome slow = sim.cycle(at(33));
  EXPECT_EQ(slow.path, CyclePath::kSlow);
  for (const auto& plan : slow.plans) EXPECT_TRUE(plan.shutdown);
}

TEST(Coordinator, CacheDisabledStillNegotiates) {
  SimOptions opt;
  opt.cacheCapacity = 0;
  SimCluster sim(3, opt);
  std::mt19937 rng(1);
  for (int step = 0; step < 3; ++step) {
    postShuffled(sim, tensorNames(10), rng);
    const CycleOutcome c = sim.cycle(at(step));
    EXPECT_EQ(c.path, CyclePath::kSlow);
    EXPECT_EQ(namesOf(c.plans[0]).size(), 10u);
  }
  EXPECT_EQ(sim.cycle(at(9)).path, CyclePath::kFast);  // nothing queued anywhere
}

// Random traffic: ranks post random subsets in random orders over many cycles, with a small
// cache (evictions) and occasional shape changes. Invariants: every rank's plan is identical,
// cache bits agree on every rank, and every posted tensor completes exactly once.
TEST(Coordinator, RandomTrafficKeepsRanksInAgreement) {
  constexpr int kRanks = 5;
  SimOptions opt;
  opt.cacheCapacity = 12;
  opt.fusionThresholdBytes = 1024;
  SimCluster sim(kRanks, opt);
  std::mt19937 rng(2024);
  const auto names = tensorNames(30);
  // What each rank has posted and not seen complete; and the shape each name has this epoch.
  std::vector<std::set<std::string>> pending(kRanks);
  std::map<std::string, int64_t> width;
  for (const auto& n : names) width[n] = 4;
  int completed = 0, fast = 0, fromCache = 0;
  for (int cycle = 0; cycle < 400; ++cycle) {
    // Every third cycle nobody posts, so queued cache hits can complete on the fast path.
    for (int r = 0; r < kRanks && cycle % 3 != 2; ++r) {
      for (int k = 0; k < 4; ++k) {
        const std::string& n = names[rng() % names.size()];
        if (pending[r].count(n)) continue;
        // A name's shape changes only when nobody has it in flight.
        bool busy = false;
        for (const auto& p : pending) busy = busy || p.count(n);
        if (!busy && rng() % 10 == 0) width[n] = 1 + static_cast<int64_t>(rng() % 8);
        const Request q = (std::hash<std::string>{}(n) % 2)
                              ? sparseRequest(r, n, 100, width[n])
                              : makeRequest(r, n, OpType::kAllreduce, DataType::kFloat32,
                                            TensorShape({width[n], 3}));
        ASSERT_TRUE(sim.post(q, at(cycle)).isOk());
        pending[r].insert(n);
      }
    }
    const CycleOutcome c = sim.cycle(at(cycle));
    expectSamePlanEverywhere(c);
    fast += c.path == CyclePath::kFast;
    fromCache += static_cast<int>(c.servedFromCache);
    for (const auto& resp : c.plans[0].responses) {
      EXPECT_NE(resp.type, ResponseType::kError) << resp.errorMessage;
      for (const auto& n : resp.tensorNames) {
        for (int r = 0; r < kRanks; ++r) {
          ASSERT_EQ(pending[r].erase(n), 1u) << n << " completed on rank " << r << " twice";
        }
        ++completed;
      }
    }
    for (int r = 1; r < kRanks; ++r) ASSERT_EQ(sim.cacheBits(r), sim.cacheBits(0)) << cycle;
  }
  EXPECT_GT(completed, 100);
  EXPECT_GT(fast, 0);
  EXPECT_GT(fromCache, 0);
  EXPECT_GT(sim.rank(0).cache().evictions(), 0);
}

}  // namespace
}  // namespace zen::controller
