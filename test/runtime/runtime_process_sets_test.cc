// Process sets end to end through the daemon (core/message.h "Process sets"): four ranks
// register {0, 1}, {2, 3} and {1, 2, 3}; every collective runs over them, the two disjoint
// sets under the same names at once, interleaved with the whole job's, over several steps
// (the response cache); results are checked against references computed from every member's
// input. Then removal, the errors every rank must see (bad ranks, non-members, unknown sets,
// mismatched registrations, a set removed under a pending tensor) and a joined member. The
// same steps run over in-process ranks, forked TCP processes and MPI (runtime_mpi_test.cc).
#include <algorithm>

#include "test/runtime/fork_ranks.h"
#include "test/runtime/process_set_steps.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

TEST(RuntimeProcessSets, EveryCollectiveOverDisjointAndOverlappingSetsMatchesTheReference) {
  Job job(4);
  job.onEachRank([](int r, Runtime& rt) { EXPECT_EQ(processSetSteps(rt), "") << "rank " << r; });
  const RuntimeStats stats = job.rank(1).stats();
  EXPECT_GT(stats.fastPathCycles + stats.cacheHits, 0u) << "the set tensors never hit the cache";
}

TEST(RuntimeProcessSets, ForkedTcpRanksRunEveryCollectiveOverSets) {
  const auto ends = forkRuntimeRanks(4, {{"ZEN_TIMEOUT", "20"}}, 120 * kSlowdown, [](Runtime& rt) {
    const Failure f = processSetSteps(rt);
    if (!f.empty()) fmt::print(stderr, "rank {}: {}\n", rt.rank(), f);
    return f.empty() ? 0 : 1;
  });
  ASSERT_EQ(ends.size(), 4u);
  for (size_t r = 0; r < ends.size(); ++r) EXPECT_EQ(ends[r].exitCode, 0) << "rank " << r;
}

TEST(RuntimeProcessSets, BadRegistrationsAndNonMembersFailAtEnqueue) {
  Job job(3);
  Runtime& rt = job.rank(0);
  const std::vector<std::pair<TensorOp, const char*>> bad = {
      {TensorOp::addProcessSet({0, 0}), "named twice"},
      {TensorOp::addProcessSet({0, 3}), "outside the job"},
      {TensorOp::addProcessSet({}), "no ranks"},
      {TensorOp::removeProcessSet(kGlobalProcessSet), "cannot be removed"},
      {TensorOp::removeProcessSet(7), "does not exist"},
      {TensorOp::join().inProcessSet(1), "whole job"},
  };
  for (const auto& [op, why] : bad) {
    Result<Handle> h = rt.enqueue(op);
    ASSERT_FALSE(h.isOk()) << why;
    EXPECT_NE(h.status().message().find(why), std::string::npos) << h.status().message();
  }
  job.onEachRank([](int, Runtime& r) { ASSERT_TRUE(addSet(r, {1, 2}).isOk()); });
  std::vector<float> x(2, 1.0f);
  auto op = [&](int32_t set) {
    return TensorOp::allreduce("x", denseView(x, TensorShape({2})), denseView(x, TensorShape({2})))
        .inProcessSet(set);
  };
  Result<Handle> outsider = rt.enqueue(op(1));
  ASSERT_FALSE(outsider.isOk());
  EXPECT_NE(outsider.status().message().find("rank 0 is not in process set 1 (ranks 1, 2)"),
            std::string::npos)
      << outsider.status().message();
  Result<Handle> unknown = job.rank(1).enqueue(op(9));
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("process set 9 does not exist"), std::string::npos)
      << unknown.status().message();
  // A set's broadcast root is a rank within the set.
  std::vector<float> b(2, 1.0f);
  Result<Handle> root = job.rank(1).enqueue(
      TensorOp::broadcast("b", denseView(b, TensorShape({2})), 2).inProcessSet(1));
  EXPECT_FALSE(root.isOk());
}

TEST(RuntimeProcessSets, MismatchedRegistrationsFailOnEveryRankAndTheNextOnePairsUp) {
  Job job(3);
  job.onEachRank([](int r, Runtime& rt) {
    Result<int32_t> id =
        addSet(rt, r == 0 ? std::vector<int32_t>{0, 1} : std::vector<int32_t>{0, 2});
    ASSERT_FALSE(id.isOk()) << "rank " << r;
    EXPECT_NE(id.status().message().find("process_set.add.0"), std::string::npos)
        << id.status().message();
    Result<int32_t> next = addSet(rt, {0, 2});
    ASSERT_TRUE(next.isOk()) << next.status().toString();
    EXPECT_EQ(next.value(), 1);
  });
}

TEST(RuntimeProcessSets, RemovingASetFailsItsPendingTensorsOnTheirPosters) {
  Job job(3);
  job.onEachRank([](int, Runtime& rt) { ASSERT_TRUE(addSet(rt, {0, 1}).isOk()); });
  std::vector<float> x(2, 1.0f);
  Result<Handle> pending = job.rank(0).enqueue(
      TensorOp::allreduce("p", denseView(x, TensorShape({2})), denseView(x, TensorShape({2})))
          .inProcessSet(1));
  ASSERT_TRUE(pending.isOk());
  job.onEachRank([](int, Runtime& rt) { EXPECT_TRUE(removeSet(rt, 1).isOk()); });
  const Status st = waitFor(pending.value());
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("removed"), std::string::npos) << st.message();
}

TEST(RuntimeProcessSets, AJoinedMemberContributesZerosToItsSetsAllreduce) {
  Job job(4);
  job.onEachRank([](int, Runtime& rt) { ASSERT_TRUE(addSet(rt, {0, 1, 2}).isOk()); });
  std::vector<std::vector<float>> in(4, std::vector<float>(3)), out(4, std::vector<float>(3));
  for (int r = 0; r < 4; ++r) in[r] = {float(r + 1), float(r + 2), float(r + 3)};
  const Handle join = stepWithJoinedRank(job, 2, [&](const std::vector<int>& posters) {
    job.onEachRank([&](int r, Runtime& rt) {
      if (r == 3 || std::find(posters.begin(), posters.end(), r) == posters.end()) return;
      Result<Handle> h =
          rt.enqueue(TensorOp::allreduce("j", denseView(in[r], TensorShape({3})),
                                         denseView(out[r], TensorShape({3})), ReduceOp::kSum)
                         .inProcessSet(1));
      ASSERT_TRUE(h.isOk()) << h.status().toString();
      ASSERT_TRUE(waitFor(h.value()).isOk());
    });
  });
  ASSERT_TRUE(waitFor(join).isOk());
  for (int r : {0, 1}) EXPECT_EQ(out[r], (std::vector<float>{3, 5, 7})) << "rank " << r;
}

}  // namespace
}  // namespace zen::testing
