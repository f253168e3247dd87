// ZEN_AUTOTUNE over real ranks (in-process threads): rank 0 scores points and sends each to
// every rank in a plan, all ranks switch at the same plan (their stats agree), results stay
// exact throughout, and the CSV log holds the points scored and the best of them.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "test/runtime/fork_ranks.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 3;
constexpr int kTensors = 4;
constexpr int kSteps = 80;  // enough for the budgets below, with room for the switches

struct Row {
  std::string point;
  int64_t fusionBytes = 0;
  double cycleMs = 0;
  double score = 0;
};

std::vector<Row> readLog(const std::string& path, std::string* header) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::getline(in, *header);
  std::vector<Row> rows;
  for (std::string line; std::getline(in, line);) {
    std::stringstream fields(line);
    Row row;
    std::string fusion, cycle, score;
    std::getline(fields, row.point, ',');
    std::getline(fields, fusion, ',');
    std::getline(fields, cycle, ',');
    std::getline(fields, score, ',');
    row.fusionBytes = std::stoll(fusion);
    row.cycleMs = std::stod(cycle);
    row.score = std::stod(score);
    rows.push_back(row);
  }
  return rows;
}

// kSteps steps of kTensors dense allreduces of different sizes, each checked exactly; the
// first failure as text, empty when all were right.
std::string rankSteps(Runtime& rt) {
  const int r = rt.rank();
  const int n = rt.size();
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::vector<float>> data;
    std::vector<TensorOp> ops;
    for (int t = 0; t < kTensors; ++t) {
      data.emplace_back(static_cast<size_t>(256 << t), static_cast<float>(r + step + t));
    }
    for (int t = 0; t < kTensors; ++t) {
      const TensorShape shape({static_cast<int64_t>(data[t].size())});
      ops.push_back(TensorOp::allreduce("t" + std::to_string(t), denseView(data[t], shape),
                                        denseView(data[t], shape), ReduceOp::kSum));
    }
    auto handles = rt.enqueueGroup(std::move(ops));
    if (!handles.isOk()) return handles.status().toString();
    for (const Handle& h : handles.value()) {
      const Status st = waitFor(h);
      if (!st.isOk()) return fmt::format("step {}: {}", step, st.toString());
    }
    const float base = static_cast<float>(n * (n - 1) / 2);  // the sum of the ranks
    for (int t = 0; t < kTensors; ++t) {
      const float want = base + static_cast<float>(n * (step + t));
      for (float x : data[t]) {
        if (x != want) return fmt::format("step {}, t{}: {} != {}", step, t, x, want);
      }
    }
  }
  return "";
}

void runSteps(Job& job) {
  job.onEachRank([](int r, Runtime& rt) { EXPECT_EQ(rankSteps(rt), "") << "rank " << r; });
}

std::string logPath(const char* name) {
  return ::testing::TempDir() + name + std::to_string(getpid()) + ".csv";
}

// Every rank ends on the same parameters, the best point of the log.
void expectRanksOnTheBest(Job& job, const Row& best) {
  const RuntimeStats first = job.rank(0).stats();
  ASSERT_TRUE(first.tunedParameters.has_value());
  EXPECT_EQ(first.tunedParameters->fusionThresholdBytes, best.fusionBytes);
  EXPECT_NEAR(first.tunedParameters->cycleTimeMs, best.cycleMs, 1e-9);
  for (int r = 1; r < kRanks; ++r) {
    const RuntimeStats s = job.rank(r).stats();
    EXPECT_EQ(s.parameterUpdates, first.parameterUpdates) << "rank " << r;
    EXPECT_EQ(s.tunedParameters, first.tunedParameters) << "rank " << r;
  }
}

TEST(RuntimeAutotune, RanksSwitchTogetherAndTheLogRecordsTheBestPoint) {
  const std::string path = logPath("autotune");
  const int points = 7;  // the configured values, Horovod's 4 seeds, 2 proposals
  Job job(kRanks, testConfig({{"ZEN_AUTOTUNE", "1"},
                              {"ZEN_AUTOTUNE_LOG", path},
                              {"ZEN_AUTOTUNE_WARMUP_SAMPLES", "1"},
                              {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                              {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", std::to_string(points)}}));
  ASSERT_EQ(job.size(), kRanks);
  runSteps(job);

  std::string header;
  const std::vector<Row> rows = readLog(path, &header);
  EXPECT_EQ(header, "point,fusion_threshold_bytes,cycle_time_ms,bytes_per_second");
  ASSERT_EQ(rows.size(), static_cast<size_t>(points + 1)) << "tuning did not finish";
  // The configured values first (Horovod's defaults), then other points.
  EXPECT_EQ(rows[0].point, "0");
  EXPECT_EQ(rows[0].fusionBytes, int64_t{128} << 20);
  EXPECT_EQ(rows[0].cycleMs, 1.0);
  std::set<std::pair<int64_t, double>> distinct;
  const Row* top = &rows[0];
  for (int i = 0; i < points; ++i) {
    EXPECT_EQ(rows[i].point, std::to_string(i));
    EXPECT_GT(rows[i].score, 0.0) << "point " << i;
    distinct.insert({rows[i].fusionBytes, rows[i].cycleMs});
    if (rows[i].score > top->score) top = &rows[i];
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(points));
  const Row& best = rows.back();
  EXPECT_EQ(best.point, "best");
  EXPECT_EQ(best.fusionBytes, top->fusionBytes);
  EXPECT_EQ(best.cycleMs, top->cycleMs);
  expectRanksOnTheBest(job, best);
  // One plan per point after the first, and one more for the best unless it was the last.
  const RuntimeStats s = job.rank(0).stats();
  EXPECT_GE(s.parameterUpdates, static_cast<uint64_t>(points - 1));
  EXPECT_LE(s.parameterUpdates, static_cast<uint64_t>(points));
  std::remove(path.c_str());
}

// A knob the user set (ZEN_CYCLE_TIME) is never tuned; the other one is.
TEST(RuntimeAutotune, AKnobSetExplicitlyStaysFixed) {
  const std::string path = logPath("autotune-fixed");
  Job job(kRanks, testConfig({{"ZEN_AUTOTUNE", "1"},
                              {"ZEN_AUTOTUNE_LOG", path},
                              {"ZEN_AUTOTUNE_WARMUP_SAMPLES", "0"},
                              {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                              {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "3"},
                              {"ZEN_CYCLE_TIME", "2"}}));
  ASSERT_EQ(job.size(), kRanks);
  runSteps(job);
  std::string header;
  const std::vector<Row> rows = readLog(path, &header);
  ASSERT_EQ(rows.size(), 4u) << "tuning did not finish";
  std::set<int64_t> thresholds;
  for (const Row& row : rows) {
    EXPECT_EQ(row.cycleMs, 2.0) << row.point;
    thresholds.insert(row.fusionBytes);
  }
  EXPECT_EQ(thresholds.size(), 3u);
  expectRanksOnTheBest(job, rows.back());
  std::remove(path.c_str());
}

// The same over TCP between processes: each rank writes what it ended on, and all agree with
// the log's choice.
TEST(RuntimeAutotune, ForkedTcpRanksSwitchTogether) {
  const std::string path = logPath("autotune-tcp");
  const std::string ranksAt = ::testing::TempDir() + "autotune-ranks" + std::to_string(getpid());
  const auto ends =
      forkRuntimeRanks(kRanks,
                       {{"ZEN_TIMEOUT", "20"},
                        {"ZEN_AUTOTUNE", "1"},
                        {"ZEN_AUTOTUNE_LOG", path},
                        {"ZEN_AUTOTUNE_WARMUP_SAMPLES", "0"},
                        {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                        {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "3"}},
                       120 * kSlowdown, [&](Runtime& rt) {
                         const std::string failed = rankSteps(rt);
                         if (!failed.empty()) {
                           std::fprintf(stderr, "rank %d: %s\n", rt.rank(), failed.c_str());
                           return 20;
                         }
                         const RuntimeStats s = rt.stats();
                         if (!s.tunedParameters) return 21;
                         std::ofstream out(ranksAt + "." + std::to_string(rt.rank()));
                         out << s.parameterUpdates << "," << s.tunedParameters->fusionThresholdBytes
                             << "," << s.tunedParameters->cycleTimeMs << "\n";
                         return out.good() ? 0 : 22;
                       });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ends[r].exitCode, 0) << "rank " << r;
  std::string header;
  const std::vector<Row> rows = readLog(path, &header);
  ASSERT_EQ(rows.size(), 4u) << "tuning did not finish";
  std::string first;
  for (int r = 0; r < kRanks; ++r) {
    std::ifstream in(ranksAt + "." + std::to_string(r));
    std::string line;
    std::getline(in, line);
    if (r == 0) first = line;
    EXPECT_EQ(line, first) << "rank " << r;
    std::remove((ranksAt + "." + std::to_string(r)).c_str());
  }
  std::stringstream fields(first);
  std::string updates, fusion, cycle;
  std::getline(fields, updates, ',');
  std::getline(fields, fusion, ',');
  std::getline(fields, cycle, ',');
  EXPECT_EQ(std::stoll(fusion), rows.back().fusionBytes);
  EXPECT_NEAR(std::stod(cycle), rows.back().cycleMs, 1e-9);
  EXPECT_GE(std::stoi(updates), 2);
  std::remove(path.c_str());
}

TEST(RuntimeAutotune, AnUnwritableLogFailsRankZerosStart) {
  const bindings::InProcessJob job = bindings::InProcessJob::make(1);
  auto rt = bindings::createInProcessRuntime(
      testConfig({{"ZEN_AUTOTUNE", "1"}, {"ZEN_AUTOTUNE_LOG", "/nonexistent/dir/tune.csv"}}), 0,
      job);
  ASSERT_FALSE(rt.isOk());
  EXPECT_EQ(rt.status().code(), StatusCode::kIoError);
  EXPECT_NE(rt.status().message().find("/nonexistent/dir/tune.csv"), std::string::npos)
      << rt.status().toString();
}

}  // namespace
}  // namespace zen::testing
