// Fusion and the timeline: a step of many small tensors runs as few buckets (seen in the
// stats and in the Chrome trace), and the trace holds every phase with its arguments.
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 4;
constexpr int kDense = 64;
constexpr int kSparse = 32;

std::string tracePath(const char* name) {
  return ::testing::TempDir() + name + std::to_string(getpid()) + ".json";
}

nlohmann::json readTrace(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);  // throws (fails the test) on invalid JSON
}

// pid -> row name, from the trace's metadata.
std::map<int, std::string> rowNames(const nlohmann::json& trace) {
  std::map<int, std::string> rows;
  for (const auto& e : trace) {
    if (e["ph"] == "M" && e["name"] == "process_name") rows[e["pid"]] = e["args"]["name"];
  }
  return rows;
}

// One step: 64 small dense and 32 small sparse tensors, posted as one group per rank.
void runStep(Job& job, int step) {
  std::vector<SparseInput> sparse;  // [tensor * kRanks + rank]
  for (int t = 0; t < kSparse; ++t) {
    for (int r = 0; r < kRanks; ++r)
      sparse.push_back(makeSparse(step * 7919 + t * 31 + r, 40, 2, 0.25));
  }
  job.onEachRank([&](int r, Runtime& rt) {
    std::vector<std::vector<float>> dense(kDense, std::vector<float>(16, float(r + 1)));
    std::vector<TensorOp> ops;
    for (int t = 0; t < kDense; ++t) {
      const std::string name = fmt::format("dense.{:02}", t);
      ops.push_back(TensorOp::allreduce(name, denseView(dense[t], {4, 4}),
                                        denseView(dense[t], {4, 4}), ReduceOp::kSum));
    }
    for (int t = 0; t < kSparse; ++t) {
      ops.push_back(TensorOp::sparseAllreduce(fmt::format("sparse.{:02}", t),
                                              sparse[t * kRanks + r].view(), ReduceOp::kSum));
    }
    auto handles = rt.enqueueGroup(std::move(ops));
    ASSERT_TRUE(handles.isOk()) << handles.status().toString();
    for (const Handle& h : handles.value()) ASSERT_TRUE(waitFor(h).isOk());
    for (int t = 0; t < kDense; ++t) {
      for (float x : dense[t]) ASSERT_EQ(x, 10.0f);  // 1 + 2 + 3 + 4
    }
    for (int t = 0; t < kSparse; ++t) {
      std::vector<SparseInput> all(sparse.begin() + t * kRanks, sparse.begin() + (t + 1) * kRanks);
      EXPECT_EQ(densify(handles.value()[kDense + t].result().sparse), denseSum(all));
    }
  });
}

TEST(RuntimeFusion, ManySmallTensorsRunAsTwoBucketsInStatsAndTimeline) {
  const std::string path = tracePath("fusion");
  Job job(kRanks,
          testConfig(
              {{"ZEN_TIMELINE", path}, {"ZEN_TIMELINE_MARK_CYCLES", "1"}, {"ZEN_SCHEME", "zen"}}));
  runStep(job, 0);  // negotiated through rank 0: one plan, fused
  std::vector<RuntimeStats> before;
  for (int r = 0; r < kRanks; ++r) before.push_back(job.rank(r).stats());
  runStep(job, 1);  // from the response cache: fused the same way
  for (int r = 0; r < kRanks; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    // Step 1 alone: one dense bucket of 64 tensors, one sparse bucket of 32.
    EXPECT_EQ(s.bucketsExecuted - before[r].bucketsExecuted, 2u) << "rank " << r;
    EXPECT_EQ(s.tensorsExecuted - before[r].tensorsExecuted, uint64_t(kDense + kSparse));
    EXPECT_EQ(s.cacheHits - before[r].cacheHits, uint64_t(kDense + kSparse));
    EXPECT_EQ(s.bucketsExecuted, 4u);
    EXPECT_EQ(s.tensors.at("dense.17").lastBucketSize, size_t(kDense));
    EXPECT_EQ(s.tensors.at("sparse.05").lastBucketSize, size_t(kSparse));
    EXPECT_EQ(s.bucketsByScheme.at("zen"), 2u);
    EXPECT_EQ(s.bucketsByScheme.at("allreduce"), 2u);
  }
  job.close();

  for (int r = 0; r < kRanks; ++r) {
    const std::string file = ::testing::TempDir() + "fusion" + std::to_string(getpid()) + ".rank" +
                             std::to_string(r) + ".json";
    const nlohmann::json trace = readTrace(file);
    const auto rows = rowNames(trace);
    std::set<int64_t> buckets;
    std::map<std::string, std::set<std::string>> phases;  // row -> phase names
    int cycles = 0, ticks = 0;
    for (const auto& e : trace) {
      if (e.value("name", "") == "CYCLE_START") ++cycles;
      if (e["ph"] == "i" && rows.count(e["pid"])) ++ticks;
      if (e["ph"] != "X") continue;
      const std::string row = rows.at(e["pid"]);
      phases[row].insert(e["name"]);
      if (e["name"] == "ALLREDUCE" || e["name"] == "SPARSE_ALLREDUCE") {
        buckets.insert(e["args"]["bucket"].get<int64_t>());
        EXPECT_EQ(e["args"]["rank"], r);
        EXPECT_TRUE(e["args"].contains("bytes_sent"));
      }
      if (e["name"] == "SPARSE_ALLREDUCE") {
        EXPECT_EQ(e["args"]["scheme"], "zen");
        EXPECT_EQ(e["args"]["tensors"], kSparse);
        EXPECT_TRUE(e["args"].contains("nnz"));
        EXPECT_TRUE(e["args"].contains("density"));
        EXPECT_TRUE(e["args"].contains("imbalance"));
      }
    }
    EXPECT_EQ(buckets, (std::set<int64_t>{0, 1, 2, 3})) << "rank " << r;
    EXPECT_GT(cycles, 0);
    // Rank 0 saw every rank's request reach its table (step 0): a tick per rank and tensor.
    EXPECT_EQ(ticks, r == 0 ? (kDense + kSparse) * kRanks : 0);
    for (const char* p :
         {"NEGOTIATE", "QUEUE", "ALLREDUCE", "FUSE", "IN_PROCESS_ALLREDUCE", "UNFUSE"}) {
      EXPECT_TRUE(phases["dense.03"].count(p)) << p;
    }
    for (const char* p : {"NEGOTIATE", "QUEUE", "SPARSE_ALLREDUCE", "FUSE", "HASH", "PUSH",
                          "AGGREGATE", "PULL", "DECODE", "UNFUSE"}) {
      EXPECT_TRUE(phases["sparse.11"].count(p)) << p;
    }
    // zen's call summary rides in the Push: no round of its own.
    EXPECT_FALSE(phases["sparse.11"].count("VALIDATE"));
  }
}

TEST(RuntimeFusion, ZeroThresholdRunsEveryTensorAlone) {
  Job job(kRanks, testConfig({{"ZEN_FUSION_THRESHOLD", "0"}}));
  runStep(job, 0);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(job.rank(r).stats().bucketsExecuted, uint64_t(kDense + kSparse));
  }
}

TEST(RuntimeTimeline, DynamicStartAndStop) {
  Job job(2, testConfig({{"ZEN_TIMELINE", "DYNAMIC"}}));
  const std::string path = tracePath("dynamic");
  job.onEachRank([&](int r, Runtime& rt) {
    EXPECT_EQ(rt.timelinePath(), "");
    ASSERT_TRUE(rt.startTimeline(path, true).isOk());
    EXPECT_NE(rt.timelinePath().find(".rank" + std::to_string(r) + ".json"), std::string::npos);
    std::vector<float> x(4, 1.0f);
    auto h = rt.enqueue(TensorOp::allreduce("x", denseView(x, {4}), denseView(x, {4})));
    ASSERT_TRUE(h.isOk());
    ASSERT_TRUE(waitFor(h.value()).isOk());
    ASSERT_TRUE(rt.stopTimeline().isOk());
    EXPECT_EQ(rt.timelinePath(), "");
  });
  for (int r = 0; r < 2; ++r) {
    const auto trace = readTrace(::testing::TempDir() + "dynamic" + std::to_string(getpid()) +
                                 ".rank" + std::to_string(r) + ".json");
    bool allreduce = false;
    for (const auto& e : trace) allreduce = allreduce || e.value("name", "") == "ALLREDUCE";
    EXPECT_TRUE(allreduce) << "rank " << r;
  }
}

TEST(RuntimeTimeline, StartNeedsDynamic) {
  Job job(1);
  const Status s = job.rank(0).startTimeline(tracePath("nope"), false);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("ZEN_TIMELINE=DYNAMIC"), std::string::npos);
}

}  // namespace
}  // namespace zen::testing
