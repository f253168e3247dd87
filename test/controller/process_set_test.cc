// Process sets through the whole negotiation with n simulated ranks (sim_cluster.h):
// registration, per-set readiness and rank numbers, removal, join, fusion, the cache fast path
// and stall warnings, as the background loop will see them.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "controller/coordinator.h"
#include "controller/fusion_planner.h"
#include "controller/validation.h"
#include "core/process_sets.h"
#include "sim_cluster.h"

namespace zen::controller {
namespace {

using testing::addSetRequest;
using testing::at;
using testing::CycleOutcome;
using testing::makeRequest;
using testing::namesOf;
using testing::removeSetRequest;
using testing::setRequest;
using testing::SimCluster;
using testing::SimOptions;

void expectSamePlanEverywhere(const CycleOutcome& c) {
  for (size_t r = 1; r < c.plans.size(); ++r) EXPECT_EQ(c.plans[r], c.plans[0]) << "rank " << r;
}

const Response* find(const ResponseList& plan, const std::string& name, int32_t set) {
  for (const Response& r : plan.responses) {
    if (r.processSet != set) continue;
    for (const auto& n : r.tensorNames) {
      if (n == name) return &r;
    }
  }
  return nullptr;
}

// Every rank posts its k-th add_process_set; returns the id of the set the cycle registered.
int32_t addSet(SimCluster& sim, int k, const std::vector<int32_t>& members, double t = 0) {
  for (int r = 0; r < sim.size(); ++r) {
    EXPECT_TRUE(sim.post(addSetRequest(r, k, members)).isOk());
  }
  const CycleOutcome c = sim.cycle(at(t));
  expectSamePlanEverywhere(c);
  EXPECT_EQ(c.plans[0].responses.size(), 1u);
  if (c.plans[0].responses.size() != 1) return -1;
  const Response& added = c.plans[0].responses[0];
  EXPECT_EQ(added.type, ResponseType::kAddProcessSet) << added.errorMessage;
  EXPECT_EQ(added.members, members);
  EXPECT_EQ(added.tensorNames, std::vector<std::string>{"process_set.add." + std::to_string(k)});
  for (int r = 0; r < sim.size(); ++r) {
    EXPECT_EQ(sim.rank(r).inFlight(), 0u);
    const auto* known = sim.rank(r).processSets().members(added.processSet);
    EXPECT_TRUE(known != nullptr && *known == members) << "rank " << r;
  }
  return added.processSet;
}

// The plan's single response after every rank posted add_process_set with members[r].
Response addWithMembers(SimCluster& sim, const std::vector<std::vector<int32_t>>& members) {
  for (int r = 0; r < sim.size(); ++r) {
    EXPECT_TRUE(sim.post(addSetRequest(r, 0, members[static_cast<size_t>(r)])).isOk());
  }
  const CycleOutcome c = sim.cycle(at(0));
  expectSamePlanEverywhere(c);
  EXPECT_EQ(c.plans[0].responses.size(), 1u);
  for (int r = 0; r < sim.size(); ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  return c.plans[0].responses.empty() ? Response{} : c.plans[0].responses[0];
}

TEST(ProcessSets, PositionsAndLookups) {
  ProcessSets sets(5);
  EXPECT_EQ(sets.position(0, 3), 3);
  sets.add(1, {1, 3, 4});
  EXPECT_EQ(sets.position(1, 3), 1);
  EXPECT_EQ(sets.position(1, 0), -1);
  EXPECT_EQ(sets.position(2, 0), -1);
  EXPECT_EQ(sets.findByMembers({1, 3, 4}), 1);
  EXPECT_EQ(sets.findByMembers({0, 1, 2, 3, 4}), 0);
  EXPECT_FALSE(sets.findByMembers({1, 3}).has_value());
  Response removed;
  removed.type = ResponseType::kRemoveProcessSet;
  removed.processSet = 1;
  sets.learn(removed);
  EXPECT_FALSE(sets.contains(1));
  removed.processSet = 0;
  sets.learn(removed);  // the job stays
  EXPECT_TRUE(sets.contains(0));
}

TEST(ProcessSetRegistration, IdsAreAssignedInOrderAndNeverReused) {
  SimCluster sim(4, SimOptions{});
  EXPECT_EQ(addSet(sim, 0, {0, 1}), 1);
  EXPECT_EQ(addSet(sim, 1, {2, 3}), 2);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(removeSetRequest(r, 1)).isOk());
  const CycleOutcome removed = sim.cycle(at(1));
  ASSERT_EQ(removed.plans[0].responses.size(), 1u);
  EXPECT_EQ(removed.plans[0].responses[0].type, ResponseType::kRemoveProcessSet);
  EXPECT_EQ(removed.plans[0].responses[0].processSet, 1);
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(sim.rank(r).processSets().contains(1));
  EXPECT_EQ(sim.coordinator().table(1), nullptr);
  EXPECT_EQ(addSet(sim, 2, {0, 1}, 2), 3);  // the same ranks again: a new id
}

TEST(ProcessSetRegistration, WaitsForEveryRank) {
  SimCluster sim(3, SimOptions{});
  for (int r : {0, 2}) ASSERT_TRUE(sim.post(addSetRequest(r, 0, {0, 2})).isOk());
  EXPECT_TRUE(sim.cycle(at(0)).plans[0].responses.empty());
  EXPECT_TRUE(sim.cycle(at(1)).plans[0].responses.empty());
  ASSERT_TRUE(sim.post(addSetRequest(1, 0, {0, 2})).isOk());  // a non-member registers it too
  const CycleOutcome c = sim.cycle(at(2));
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  EXPECT_EQ(c.plans[0].responses[0].type, ResponseType::kAddProcessSet);
  EXPECT_EQ(c.plans[0].responses[0].processSet, 1);
  EXPECT_TRUE(sim.rank(1).processSets().contains(1));
}

TEST(ProcessSetRegistration, MismatchedMembersFailOnEveryRank) {
  SimCluster sim(4, SimOptions{});
  const Response r = addWithMembers(sim, {{0, 1}, {0, 1}, {0, 2}, {0, 1}});
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_EQ(r.processSet, 0);
  EXPECT_EQ(r.tensorNames, std::vector<std::string>{"process_set.add.0"});
  EXPECT_EQ(r.errorMessage,
            "tensor 'process_set.add.0': rank 2 sent members [0, 2], ranks 0-1, 3 [0, 1]");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(sim.rank(rank).processSets().all().size(), 1u);
  }
}

TEST(ProcessSetRegistration, BadMemberListsFailOnEveryRank) {
  struct Case {
    std::vector<int32_t> members;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{0, 4},
       "'process_set.add.0': add_process_set with members [0, 4]: rank 4, outside the "
       "job's [0, 4)"},
      {{-1, 2},
       "'process_set.add.0': add_process_set with members [-1, 2]: rank -1, outside the "
       "job's [0, 4)"},
      {{2, 1},
       "'process_set.add.0': add_process_set with members [2, 1]: ranks that are not "
       "strictly ascending (1 after 2)"},
      {{1, 1},
       "'process_set.add.0': add_process_set with members [1, 1]: ranks that are not "
       "strictly ascending (1 after 1)"},
      {{}, "'process_set.add.0': add_process_set with members []: no ranks"},
      {{0, 1, 2, 3},
       "'process_set.add.0': process set 0 already has members [0, 1, 2, 3] (as in "
       "Horovod, two sets may not have the same ranks)"},
  };
  for (const Case& c : cases) {
    SimCluster sim(4, SimOptions{});
    const Response r = addWithMembers(sim, std::vector<std::vector<int32_t>>(4, c.members));
    EXPECT_EQ(r.type, ResponseType::kError);
    EXPECT_EQ(r.errorMessage, c.message);
  }
  // The same ranks as an existing set.
  SimCluster sim(4, SimOptions{});
  ASSERT_EQ(addSet(sim, 0, {1, 2}), 1);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(addSetRequest(r, 1, {1, 2})).isOk());
  const CycleOutcome c = sim.cycle(at(1));
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  EXPECT_EQ(c.plans[0].responses[0].errorMessage,
            "'process_set.add.1': process set 1 already has members [1, 2] (as in Horovod, two "
            "sets may not have the same ranks)");
  EXPECT_EQ(addSet(sim, 2, {1, 3}, 2), 2);  // a refused add took no id
}

TEST(ProcessSetRegistration, RemovingAnUnknownSetFailsOnEveryRank) {
  SimCluster sim(3, SimOptions{});
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(sim.post(removeSetRequest(r, 7)).isOk());
  const CycleOutcome c = sim.cycle(at(0));
  expectSamePlanEverywhere(c);
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  const Response& error = c.plans[0].responses[0];
  EXPECT_EQ(error.type, ResponseType::kError);
  EXPECT_EQ(error.processSet, 7);  // the set the requests were posted on: they complete
  EXPECT_EQ(error.errorMessage,
            "'process_set.remove.7': process set 7 does not exist (never added, or removed)");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  // The job cannot be removed: refused at once.
  EXPECT_FALSE(sim.post(removeSetRequest(0, 0)).isOk());
}

TEST(ProcessSetRegistration, RanksDisagreeingOnTheSetToRemoveAllFail) {
  SimCluster sim(3, SimOptions{});
  ASSERT_EQ(addSet(sim, 0, {0, 1}), 1);
  ASSERT_EQ(addSet(sim, 1, {1, 2}), 2);
  for (int r = 0; r < 3; ++r) {
    Request q = removeSetRequest(r, r == 2 ? 2 : 1);
    q.name = "process_set.remove";  // a name that does not carry the id
    ASSERT_TRUE(sim.post(q).isOk());
  }
  const CycleOutcome c = sim.cycle(at(1));
  expectSamePlanEverywhere(c);
  // One error per set the requests were posted on, so that every rank's completes.
  ASSERT_EQ(c.plans[0].responses.size(), 2u);
  for (const Response& r : c.plans[0].responses) {
    EXPECT_EQ(r.type, ResponseType::kError);
    EXPECT_EQ(r.errorMessage,
              "tensor 'process_set.remove': rank 2 sent process set 2, ranks 0-1 1");
  }
  EXPECT_EQ(c.plans[0].responses[0].processSet, 1);
  EXPECT_EQ(c.plans[0].responses[1].processSet, 2);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  EXPECT_NE(sim.coordinator().table(1), nullptr);
  EXPECT_NE(sim.coordinator().table(2), nullptr);
}

TEST(ProcessSetNegotiation, DisjointSetsNegotiateTheSameNamesConcurrently) {
  SimOptions opt;
  opt.fusionThresholdBytes = 0;  // one response per tensor
  SimCluster sim(4, opt);
  const int32_t a = addSet(sim, 0, {0, 1});
  const int32_t b = addSet(sim, 1, {2, 3});
  // Auto-generated names collide across sets; each set pairs them up on its own.
  for (int p = 0; p < 2; ++p) {
    Request qa = setRequest(a, p, "allreduce.noname.0");
    qa.device = Device{Device::Kind::kCuda, p};
    ASSERT_TRUE(sim.postAs(p, qa).isOk());
    Request qb = setRequest(b, p, "allreduce.noname.0");
    qb.device = Device{Device::Kind::kCuda, 10 + p};
    ASSERT_TRUE(sim.postAs(2 + p, qb).isOk());
  }
  const CycleOutcome c = sim.cycle(at(1));
  expectSamePlanEverywhere(c);
  ASSERT_EQ(c.plans[0].responses.size(), 2u);
  // Set by set, ascending id; every rank's plan holds both (non-members skip them).
  const Response& ra = c.plans[0].responses[0];
  const Response& rb = c.plans[0].responses[1];
  EXPECT_EQ(ra.processSet, a);
  EXPECT_EQ(rb.processSet, b);
  for (const Response* r : {&ra, &rb}) {
    EXPECT_EQ(r->type, ResponseType::kAllreduce);
    EXPECT_EQ(r->tensorNames, std::vector<std::string>{"allreduce.noname.0"});
  }
  // Devices indexed by rank within the set.
  EXPECT_EQ(ra.devices, (std::vector<Device>{{Device::Kind::kCuda, 0}, {Device::Kind::kCuda, 1}}));
  EXPECT_EQ(rb.devices,
            (std::vector<Device>{{Device::Kind::kCuda, 10}, {Device::Kind::kCuda, 11}}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
}

TEST(ProcessSetNegotiation, ASetTensorIsReadyWithoutNonMembers) {
  SimCluster sim(4, SimOptions{});
  const int32_t s = addSet(sim, 0, {1, 3});
  // A broadcast from job rank 3 (rank 1 within the set) and an allgather of uneven rows.
  for (int p = 0; p < 2; ++p) {
    const int job = p == 0 ? 1 : 3;
    Request bcast = setRequest(s, p, "weights", OpType::kBroadcast);
    bcast.rootRank = 1;
    ASSERT_TRUE(sim.postAs(job, bcast).isOk());
    ASSERT_TRUE(sim.postAs(job, setRequest(s, p, "rows", OpType::kAllgather, DataType::kFloat32,
                                           TensorShape({2 + p, 3})))
                    .isOk());
  }
  const CycleOutcome c = sim.cycle(at(1));
  expectSamePlanEverywhere(c);
  EXPECT_EQ(namesOf(c.plans[0]), (std::vector<std::string>{"rows", "weights"}));
  const Response* bcast = find(c.plans[2], "weights", s);  // a non-member's plan has it too
  ASSERT_NE(bcast, nullptr);
  EXPECT_EQ(bcast->type, ResponseType::kBroadcast);
  EXPECT_EQ(bcast->rootRank, 1);
  EXPECT_EQ(bcast->devices.size(), 2u);
  const Response* rows = find(c.plans[0], "rows", s);
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->gatherRows, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(rows->shapes, std::vector<TensorShape>{TensorShape({5, 3})});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
}

TEST(ProcessSetNegotiation, RankNumbersAreCheckedWithinTheSet) {
  SimCluster sim(4, SimOptions{});
  const int32_t s = addSet(sim, 0, {0, 2});
  Request bcast = setRequest(s, 0, "w", OpType::kBroadcast);
  bcast.rootRank = 2;  // a job rank, not a rank within the set of 2
  const Status root = sim.postAs(0, bcast);
  EXPECT_FALSE(root.isOk());
  EXPECT_NE(root.message().find("broadcast root rank 2 outside [0, 2)"), std::string::npos)
      << root.message();
  // Job rank 2 is rank 1 in the set: posting as job rank 2 is a mistake.
  const Status rank = sim.postAs(2, setRequest(s, 2, "x"));
  EXPECT_FALSE(rank.isOk());
  EXPECT_EQ(rank.message(), "tensor 'x': posted as rank 2 on rank 2 (rank 1 in process set 1)");
  const Status outsider = sim.postAs(1, setRequest(s, 0, "x"));
  EXPECT_FALSE(outsider.isOk());
  EXPECT_EQ(outsider.message(), "tensor 'x': rank 1 is not a member of process set 1");
  const Status unknown = sim.postAs(0, setRequest(5, 0, "x"));
  EXPECT_FALSE(unknown.isOk());
  EXPECT_EQ(unknown.message(),
            "tensor 'x': process set 5 does not exist on rank 0 (never added, or removed)");
  // Alltoall splits are judged against the set's size by rank 0.
  for (int p = 0; p < 2; ++p) {
    Request q = setRequest(s, p, "a2a", OpType::kAlltoall, DataType::kFloat32, TensorShape({3}));
    q.splits = {1, 1, 1};
    ASSERT_TRUE(sim.postAs(p * 2, q).isOk());
  }
  const CycleOutcome c = sim.cycle(at(1));
  ASSERT_EQ(c.plans[0].responses.size(), 1u);
  EXPECT_EQ(c.plans[0].responses[0].type, ResponseType::kError);
  EXPECT_EQ(c.plans[0].responses[0].processSet, s);
  EXPECT_EQ(c.plans[0].responses[0].errorMessage,
            "tensor 'a2a': alltoall splits do not fit: ranks 0-1 sent splits [1, 1, 1] (3 "
            "entries) for 2 ranks (process set 1: ranks are positions in its members, job ranks "
            "[0, 2])");
}

TEST(ProcessSetNegotiation, AnotherSetsResponseOfTheSameNameDoesNotCompleteThisRanks) {
  SimCluster sim(4, SimOptions{});
  const int32_t a = addSet(sim, 0, {0, 1});
  const int32_t b = addSet(sim, 1, {2, 3});
  ASSERT_TRUE(sim.postAs(0, setRequest(a, 0, "g")).isOk());
  for (int p = 0; p < 2; ++p) ASSERT_TRUE(sim.postAs(2 + p, setRequest(b, p, "g")).isOk());
  const CycleOutcome first = sim.cycle(at(1));
  ASSERT_EQ(first.plans[0].responses.size(), 1u);
  EXPECT_EQ(first.plans[0].responses[0].processSet, b);
  EXPECT_EQ(sim.rank(0).inFlight(), 1u);  // its "g" of set a still waits for job rank 1
  EXPECT_FALSE(sim.postAs(0, setRequest(a, 0, "g")).isOk());
  ASSERT_TRUE(sim.postAs(1, setRequest(a, 1, "g")).isOk());
  const CycleOutcome second = sim.cycle(at(2));
  ASSERT_EQ(second.plans[0].responses.size(), 1u);
  EXPECT_EQ(second.plans[0].responses[0].processSet, a);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
}

TEST(ProcessSetNegotiation, RequestsRankZeroRefusesFailWithTheirSet) {
  // A misbehaving peer (or a request sent after its set went): rank 0 answers with an error
  // that carries the set, so that the poster's entry completes.
  Coordinator coord(CoordinatorOptions{3});
  std::vector<RequestList> lists(3);
  Request add = addSetRequest(0, 0, {0, 1});
  for (int r = 0; r < 3; ++r) lists[static_cast<size_t>(r)].requests = {add};
  ResponseList plan = coord.computeResponses(lists, at(0));
  ASSERT_EQ(plan.responses.size(), 1u);
  ASSERT_EQ(plan.responses[0].processSet, 1);

  lists.assign(3, RequestList{});
  lists[0].requests = {setRequest(1, 0, "x"), setRequest(4, 0, "y")};
  lists[1].requests = {setRequest(1, 1, "other")};
  lists[2].requests = {setRequest(1, 0, "x")};  // job rank 2 is not in set 1
  plan = coord.computeResponses(lists, at(1));
  ASSERT_EQ(plan.responses.size(), 2u);
  const Response& notMember = plan.responses[0];
  EXPECT_EQ(notMember.type, ResponseType::kError);
  EXPECT_EQ(notMember.processSet, 1);
  EXPECT_EQ(notMember.tensorNames, std::vector<std::string>{"x"});
  EXPECT_EQ(notMember.errorMessage,
            "tensor 'x': job rank 2 posted it for process set 1, whose members are job ranks "
            "[0, 1]: it is not one");
  const Response& unknown = plan.responses[1];
  EXPECT_EQ(unknown.processSet, 4);
  EXPECT_EQ(unknown.errorMessage,
            "tensor 'y': job rank 0 posted it for process set 4, which does not exist (never "
            "added, or removed)");
  // The error completed job rank 0's "x" too, so rank 0 forgot it; "other" still waits.
  ASSERT_NE(coord.table(1), nullptr);
  EXPECT_EQ(coord.table(1)->entries().count("x"), 0u);
  EXPECT_EQ(coord.table(1)->entries().count("other"), 1u);
}

TEST(ProcessSetRemoval, PendingNamesFailFirstAndReadyOnesRun) {
  SimOptions opt;
  opt.fusionThresholdBytes = 0;
  SimCluster sim(4, opt);
  const int32_t s = addSet(sim, 0, {0, 1, 2});
  ASSERT_TRUE(sim.postAs(0, setRequest(s, 0, "pending")).isOk());
  ASSERT_TRUE(sim.postAs(2, setRequest(s, 2, "pending")).isOk());
  sim.cycle(at(1));
  // In the cycle of the removal "ready" completes in the set; "pending" never will.
  for (int p = 0; p < 3; ++p) ASSERT_TRUE(sim.postAs(p, setRequest(s, p, "ready")).isOk());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(removeSetRequest(r, s)).isOk());
  ASSERT_TRUE(sim.post(makeRequest(3, "job")).isOk());  // the job's table goes on
  const CycleOutcome c = sim.cycle(at(2));
  expectSamePlanEverywhere(c);
  const auto& rs = c.plans[0].responses;
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].tensorNames, std::vector<std::string>{"ready"});
  EXPECT_EQ(rs[0].type, ResponseType::kAllreduce);
  EXPECT_EQ(rs[0].processSet, s);
  EXPECT_EQ(rs[1].type, ResponseType::kError);
  EXPECT_EQ(rs[1].processSet, s);
  EXPECT_EQ(rs[1].errorMessage,
            "process set 1 was removed while 'pending' was pending on job ranks 0, 2 (waiting "
            "for job rank 1)");
  EXPECT_EQ(rs[2].type, ResponseType::kRemoveProcessSet);
  EXPECT_EQ(rs[2].processSet, s);
  EXPECT_EQ(sim.rank(0).inFlight(), 0u);
  EXPECT_EQ(sim.rank(3).inFlight(), 1u);  // "job"
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(sim.rank(r).processSets().contains(s));
  // The set is gone everywhere: posting to it fails at once.
  EXPECT_FALSE(sim.postAs(0, setRequest(s, 0, "late")).isOk());
}

TEST(ProcessSetJoin, AJoinedMemberStandsInForSetTensors) {
  SimCluster sim(4, SimOptions{});
  const int32_t s = addSet(sim, 0, {1, 2});
  Request join = makeRequest(2, kJoinTensorName, OpType::kJoin);
  ASSERT_TRUE(sim.post(join).isOk());
  ASSERT_TRUE(sim.postAs(1, setRequest(s, 0, "emb", OpType::kAllgather, DataType::kFloat32,
                                       TensorShape({3, 2})))
                  .isOk());
  const CycleOutcome c = sim.cycle(at(1));
  expectSamePlanEverywhere(c);
  const Response* gathered = find(c.plans[0], "emb", s);
  ASSERT_NE(gathered, nullptr);
  EXPECT_EQ(gathered->type, ResponseType::kAllgather);
  EXPECT_EQ(gathered->gatherRows, (std::vector<int64_t>{3, 0}));  // the joined member gives none
  EXPECT_EQ(find(c.plans[0], kJoinTensorName, 0), nullptr);       // the set being "all joined"
  // A set's table does not complete the job's join: only every job rank joining does.
  for (int r : {0, 1, 3})
    ASSERT_TRUE(sim.post(makeRequest(r, kJoinTensorName, OpType::kJoin)).isOk());
  const CycleOutcome done = sim.cycle(at(2));
  ASSERT_EQ(done.plans[0].responses.size(), 1u);
  EXPECT_EQ(done.plans[0].responses[0].type, ResponseType::kJoin);
  EXPECT_EQ(done.plans[0].responses[0].lastJoinedRank, 3);
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(sim.rank(r).joined());
  // The join state is cleared in every table: job rank 2 must post again.
  ASSERT_TRUE(sim.postAs(1, setRequest(s, 0, "next")).isOk());
  EXPECT_TRUE(sim.cycle(at(3)).plans[0].responses.empty());
  ASSERT_TRUE(sim.postAs(2, setRequest(s, 1, "next")).isOk());
  EXPECT_EQ(namesOf(sim.cycle(at(4)).plans[0]), std::vector<std::string>{"next"});
}

TEST(ProcessSetJoin, RegistrationWaitsForRealPosts) {
  SimOptions opt;
  opt.stallCheckSeconds = 60;
  SimCluster sim(3, opt);
  ASSERT_TRUE(sim.post(makeRequest(2, kJoinTensorName, OpType::kJoin)).isOk());
  for (int r : {0, 1}) ASSERT_TRUE(sim.post(addSetRequest(r, 0, {0, 1})).isOk());
  EXPECT_TRUE(sim.cycle(at(0)).plans[0].responses.empty());
  // The stall inspector names the joined rank: it must post the registration itself.
  const CycleOutcome stalled = sim.cycle(at(61));
  EXPECT_NE(stalled.stallWarning.find("\n2: [process_set.add.0]"), std::string::npos)
      << stalled.stallWarning;
  for (int r : {0, 1}) ASSERT_TRUE(sim.post(makeRequest(r, kJoinTensorName, OpType::kJoin)).isOk());
  // Ranks 0 and 1 posted the add before joining: the join completes, the add still waits.
  const CycleOutcome joined = sim.cycle(at(62));
  ASSERT_EQ(joined.plans[0].responses.size(), 1u);
  EXPECT_EQ(joined.plans[0].responses[0].type, ResponseType::kJoin);
  ASSERT_TRUE(sim.post(addSetRequest(2, 0, {0, 1})).isOk());
  const CycleOutcome added = sim.cycle(at(63));
  ASSERT_EQ(added.plans[0].responses.size(), 1u);
  EXPECT_EQ(added.plans[0].responses[0].type, ResponseType::kAddProcessSet);
}

TEST(ProcessSetJoin, ASetAddedWhileAMemberIsJoinedCountsItAsJoined) {
  SimCluster sim(3, SimOptions{});
  // Job rank 2 posts the add and then joins, in the cycle that registers the set.
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(sim.post(addSetRequest(r, 0, {0, 2})).isOk());
  ASSERT_TRUE(sim.post(makeRequest(2, kJoinTensorName, OpType::kJoin)).isOk());
  const CycleOutcome added = sim.cycle(at(0));
  ASSERT_EQ(added.plans[0].responses.size(), 1u);
  const int32_t s = added.plans[0].responses[0].processSet;
  ASSERT_EQ(s, 1);
  ASSERT_NE(sim.coordinator().table(s), nullptr);
  EXPECT_TRUE(sim.coordinator().table(s)->joined(1));
  ASSERT_TRUE(sim.postAs(0, setRequest(s, 0, "x")).isOk());
  EXPECT_EQ(namesOf(sim.cycle(at(1)).plans[0]), std::vector<std::string>{"x"});
}

TEST(ProcessSetFusion, NeverMixesSets) {
  Response a;
  a.type = ResponseType::kAllreduce;
  a.tensorNames = {"a"};
  a.shapes = {TensorShape({4})};
  a.devices = {Device{}, Device{}};
  Response b = a;
  b.tensorNames = {"b"};
  b.processSet = 1;
  Response c = a;
  c.tensorNames = {"c"};
  const auto fused = fuseResponses({a, b, c}, int64_t{1} << 20);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].tensorNames, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(fused[0].processSet, 0);
  EXPECT_EQ(fused[1].tensorNames, std::vector<std::string>{"b"});
  EXPECT_EQ(fused[1].processSet, 1);

  Response added;
  added.type = ResponseType::kAddProcessSet;
  added.tensorNames = {"process_set.add.0"};
  Response added2 = added;
  added2.tensorNames = {"process_set.add.1"};
  EXPECT_EQ(fuseResponses({added, added2}, int64_t{1} << 20).size(), 2u);
}

TEST(ProcessSetFusion, TwoSetsTensorsGoInTheirOwnBuckets) {
  SimCluster sim(4, SimOptions{});
  const int32_t a = addSet(sim, 0, {0, 1});
  const int32_t b = addSet(sim, 1, {2, 3});
  for (int p = 0; p < 2; ++p) {
    for (const char* name : {"w1", "w2", "w3"}) {
      ASSERT_TRUE(sim.postAs(p, setRequest(a, p, name)).isOk());
      ASSERT_TRUE(sim.postAs(2 + p, setRequest(b, p, name)).isOk());
    }
  }
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(makeRequest(r, "job")).isOk());
  const CycleOutcome c = sim.cycle(at(1));
  expectSamePlanEverywhere(c);
  const auto& rs = c.plans[0].responses;
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].processSet, 0);
  EXPECT_EQ(rs[0].tensorNames, std::vector<std::string>{"job"});
  EXPECT_EQ(rs[1].processSet, a);
  EXPECT_EQ(rs[1].tensorNames, (std::vector<std::string>{"w1", "w2", "w3"}));
  EXPECT_EQ(rs[2].processSet, b);
  EXPECT_EQ(rs[2].tensorNames, (std::vector<std::string>{"w1", "w2", "w3"}));
}

TEST(ProcessSetCache, FastPathServesSetTensorsAndRemovalErasesThemEverywhere) {
  SimCluster sim(4, SimOptions{});
  const int32_t a = addSet(sim, 0, {0, 1});
  const int32_t b = addSet(sim, 1, {1, 2, 3});  // job rank 1 is in both (names differ)
  std::mt19937 rng(7);
  auto postStep = [&]() {
    for (int p = 0; p < 2; ++p) ASSERT_TRUE(sim.postAs(p, setRequest(a, p, "g")).isOk());
    for (int p = 0; p < 3; ++p) ASSERT_TRUE(sim.postAs(1 + p, setRequest(b, p, "h")).isOk());
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(makeRequest(r, "job")).isOk());
  };
  postStep();
  const CycleOutcome first = sim.cycle(at(1));
  EXPECT_EQ(first.path, CyclePath::kSlow);
  EXPECT_EQ(first.requestsSent, 9u);
  const auto bits = sim.setCacheBits(0);
  EXPECT_EQ(bits.size(), 3u);  // ("g", a), ("h", b), ("job", 0)
  for (int r = 1; r < 4; ++r) EXPECT_EQ(sim.setCacheBits(r), bits) << "rank " << r;

  for (int step = 2; step < 6; ++step) {
    postStep();
    const CycleOutcome c = sim.cycle(at(step));
    EXPECT_EQ(c.path, CyclePath::kFast) << "step " << step;
    EXPECT_EQ(c.requestsSent, 0u);
    EXPECT_EQ(c.servedFromCache, 3u);
    ASSERT_NE(find(c.plans[3], "g", a), nullptr);  // also in a non-member's plan
    ASSERT_NE(find(c.plans[0], "h", b), nullptr);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u);
  }
  // One member missing: the set's bit does not survive the AND, the others still run.
  ASSERT_TRUE(sim.postAs(0, setRequest(a, 0, "g")).isOk());
  for (int p = 0; p < 3; ++p) ASSERT_TRUE(sim.postAs(1 + p, setRequest(b, p, "h")).isOk());
  CycleOutcome partial = sim.cycle(at(6));
  EXPECT_EQ(partial.path, CyclePath::kFast);
  EXPECT_EQ(find(partial.plans[0], "g", a), nullptr);
  EXPECT_NE(find(partial.plans[0], "h", b), nullptr);
  ASSERT_TRUE(sim.postAs(1, setRequest(a, 1, "g")).isOk());
  partial = sim.cycle(at(7));
  EXPECT_EQ(partial.path, CyclePath::kFast);
  EXPECT_NE(find(partial.plans[0], "g", a), nullptr);

  // Removing set b erases its entry on every rank, in step.
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(sim.post(removeSetRequest(r, b)).isOk());
  const CycleOutcome removed = sim.cycle(at(8));
  EXPECT_EQ(removed.path, CyclePath::kSlow);
  const auto after = sim.setCacheBits(0);
  EXPECT_EQ(after.size(), 2u);
  EXPECT_EQ(after.count({b, "h"}), 0u);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(sim.setCacheBits(r), after) << "rank " << r;
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(sim.rank(r).cache().setBits().count(b) == 0);
  // The fast path goes on for what is left.
  for (int p = 0; p < 2; ++p) ASSERT_TRUE(sim.postAs(p, setRequest(a, p, "g")).isOk());
  EXPECT_EQ(sim.cycle(at(9)).path, CyclePath::kFast);
}

TEST(ProcessSetCache, ACachedTensorOfTheSameNameInTwoSetsHasTwoEntries) {
  ResponseCache cache(8);
  Request q = setRequest(1, 0, "g");
  Response r;
  r.type = ResponseType::kAllreduce;
  r.tensorNames = {"g"};
  r.shapes = {q.shape};
  r.processSet = 1;
  cache.put(r, CacheKey::of(q));
  q.processSet = 2;
  r.processSet = 2;
  cache.put(r, CacheKey::of(q));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.lookup(q).state, ResponseCache::State::kHit);
  q.processSet = 0;
  EXPECT_EQ(cache.lookup(q).state, ResponseCache::State::kMiss);
  EXPECT_EQ(cache.setBits().size(), 2u);
  cache.eraseSet(1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.setBits().count(1), 0u);
  ASSERT_EQ(cache.setBits().at(2), std::set<int>{1});
}

TEST(ProcessSetStalls, WarningNamesTheSetAndJobRanks) {
  SimOptions opt;
  opt.stallCheckSeconds = 60;
  SimCluster sim(4, opt);
  const int32_t s = addSet(sim, 0, {1, 3});
  ASSERT_TRUE(sim.postAs(1, setRequest(s, 0, "slow")).isOk());
  ASSERT_TRUE(sim.post(makeRequest(0, "job")).isOk());
  sim.cycle(at(1));
  const CycleOutcome c = sim.cycle(at(62));
  EXPECT_NE(c.stallWarning.find("\n1: [job]"), std::string::npos) << c.stallWarning;
  EXPECT_NE(c.stallWarning.find("\n2: [job]"), std::string::npos) << c.stallWarning;
  EXPECT_NE(c.stallWarning.find("\n3: [job, slow (process set 1)]"), std::string::npos)
      << c.stallWarning;
  EXPECT_EQ(sim.coordinator().lastStallReport().missingRanks, (std::vector<int>{1, 2, 3}));
}

TEST(ProcessSetCheck, CheckRequestJudgesTheSetFields) {
  Request q = makeRequest(0, "x");
  q.processSet = -1;
  EXPECT_FALSE(checkRequest(q, 4).isOk());
  q.processSet = 2;
  EXPECT_TRUE(checkRequest(q, 4).isOk());
  q.members = {0, 1};
  EXPECT_EQ(checkRequest(q, 4).message(),
            "tensor 'x': members are for add_process_set, not "
            "allreduce");
  Request add = addSetRequest(0, 0, {5, 1});  // judged by rank 0, against every rank's
  EXPECT_TRUE(checkRequest(add, 4).isOk());
  add.processSet = 1;
  EXPECT_FALSE(checkRequest(add, 4).isOk());
  EXPECT_TRUE(checkRequest(removeSetRequest(0, 3), 4).isOk());
  EXPECT_EQ(checkRequest(removeSetRequest(0, 0), 4).message(),
            "'process_set.remove.0': process set 0 (the whole job) cannot be removed");
  Request join = makeRequest(0, kJoinTensorName, OpType::kJoin);
  join.processSet = 1;
  EXPECT_FALSE(checkRequest(join, 4).isOk());
  // Rank numbers within the set's size.
  Request bcast = setRequest(1, 1, "b", OpType::kBroadcast);
  bcast.rootRank = 1;
  EXPECT_TRUE(checkRequest(bcast, 2).isOk());
  bcast.rootRank = 2;
  EXPECT_FALSE(checkRequest(bcast, 2).isOk());
  bcast.rootRank = 0;
  bcast.rank = 2;
  EXPECT_FALSE(checkRequest(bcast, 2).isOk());
}

// Closest to the runtime the controller gets: 5 ranks, overlapping sets, every rank posting its
// sets' tensors in its own order over many steps, a set removed and another added midway. Every
// cycle every rank gets the same plan; every posted tensor runs exactly once, in its set, and
// only once all its members posted it; caches stay in step.
TEST(ProcessSetNegotiation, OverlappingSetsOverManySteps) {
  SimOptions opt;
  opt.fusionThresholdBytes = 256;
  SimCluster sim(5, opt);
  std::map<int32_t, std::vector<int32_t>> sets = {{0, {0, 1, 2, 3, 4}}};
  int adds = 0;
  for (const auto& members : std::vector<std::vector<int32_t>>{{0, 1, 2}, {2, 3}, {1, 3, 4}}) {
    const int32_t id = addSet(sim, adds, members);
    sets[id] = members;
    ++adds;
  }
  std::mt19937 rng(11);
  double now = 1;
  for (int step = 0; step < 30; ++step) {
    if (step == 10) {  // remove set 2, add {0, 4}
      for (int r = 0; r < 5; ++r) ASSERT_TRUE(sim.post(removeSetRequest(r, 2)).isOk());
      sim.cycle(at(now++));
      sets.erase(2);
      const int32_t id = addSet(sim, adds++, {0, 4}, now++);
      EXPECT_EQ(id, 4);
      sets[id] = {0, 4};
    }
    // What each job rank posts this step: three tensors per set it is in, named after the set
    // (a name is in flight once per rank, and a rank may be in several sets).
    std::vector<std::vector<Request>> mine(5);
    std::multiset<std::pair<int32_t, std::string>> expected;
    for (const auto& [id, members] : sets) {
      for (int k = 0; k < 3; ++k) {
        const std::string name = "t" + std::to_string(k) + "@" + std::to_string(id);
        expected.insert({id, name});
        for (size_t p = 0; p < members.size(); ++p) {
          mine[static_cast<size_t>(members[p])].push_back(
              setRequest(id, static_cast<int>(p), name));
        }
      }
    }
    for (auto& list : mine) std::shuffle(list.begin(), list.end(), rng);
    // Ranks post in two halves across two cycles, so that some sets wait for members.
    std::multiset<std::pair<int32_t, std::string>> ran;
    for (int half = 0; half < 2; ++half) {
      for (int r = 0; r < 5; ++r) {
        auto& list = mine[static_cast<size_t>(r)];
        const size_t n = half == 0 ? list.size() / 2 : list.size();
        for (size_t i = half == 0 ? 0 : list.size() / 2; i < n; ++i) {
          ASSERT_TRUE(sim.postAs(r, list[i]).isOk()) << list[i].name;
        }
      }
      const CycleOutcome c = sim.cycle(at(now++));
      expectSamePlanEverywhere(c);
      for (const Response& resp : c.plans[0].responses) {
        EXPECT_NE(resp.type, ResponseType::kError) << resp.errorMessage;
        EXPECT_EQ(resp.devices.size(), sets.at(resp.processSet).size());
        for (const auto& name : resp.tensorNames) ran.insert({resp.processSet, name});
      }
      for (int r = 1; r < 5; ++r) ASSERT_EQ(sim.setCacheBits(r), sim.setCacheBits(0));
    }
    EXPECT_EQ(ran, expected) << "step " << step;
    for (int r = 0; r < 5; ++r) EXPECT_EQ(sim.rank(r).inFlight(), 0u) << "step " << step;
  }
}

}  // namespace
}  // namespace zen::controller
