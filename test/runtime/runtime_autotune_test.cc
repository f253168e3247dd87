// ZEN_AUTOTUNE over real ranks (in-process threads): rank 0 scores points and sends each to
// every rank in a plan, all ranks switch at the same plan (their stats agree), results stay
// exact throughout, and the CSV log holds the points scored, the confirmation of the best
// against the configured values when it ran, and the point kept.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "test/runtime/fork_ranks.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 3;
constexpr int kTensors = 4;
constexpr int kSteps = 120;       // enough for the budgets below, with room for the switches
constexpr int kConfirmPairs = 3;  // ZEN_AUTOTUNE_CONFIRM_PAIRS' default
const TunedParameters kConfigured{int64_t{128} << 20, 1.0};  // the defaults

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
// first failure as text, empty when all were right. slowConfigured: a step sleeps 200 ms while
// the configured values are in effect, so that they lose the search and its best point must
// be confirmed against them. (20 ms was not enough: the candidate, 5 ms cycles, then won a pair
// by ~25 ms a sample, which one thread descheduled on a loaded machine can take away.)
std::string rankSteps(Runtime& rt, bool slowConfigured = false) {
  const int r = rt.rank();
  const int n = rt.size();
  for (int step = 0; step < kSteps; ++step) {
    if (slowConfigured) {
      const std::optional<TunedParameters> p = rt.stats().tunedParameters;
      if (!p || *p == kConfigured) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
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

void runSteps(Job& job, bool slowConfigured = false) {
  job.onEachRank(
      [&](int r, Runtime& rt) { EXPECT_EQ(rankSteps(rt, slowConfigured), "") << "rank " << r; });
}

bool samePoint(const Row& a, const Row& b) {
  return a.fusionBytes == b.fusionBytes && a.cycleMs == b.cycleMs;
}

// The rows after the `points` point rows: when the best scored is not point 0 (the configured
// values), kConfirmPairs pairs of confirm_candidate / confirm_incumbent rows in the order A B,
// B A, A B, ..., and confirm_ratio, the median of the pairs' ratios; then best, the point kept
// (the candidate when it won every pair and the median exceeds 1.01) with its score from the
// search. *confirmed:
// whether the confirmation ran.
void expectTheChoice(const std::vector<Row>& rows, int points, bool* confirmed) {
  ASSERT_GE(rows.size(), static_cast<size_t>(points + 1)) << "tuning did not finish";
  const Row* top = &rows[0];
  for (int i = 0; i < points; ++i) {
    ASSERT_EQ(rows[i].point, std::to_string(i));
    if (rows[i].score > top->score) top = &rows[i];
  }
  *confirmed = top != &rows[0];
  const Row* kept = top;
  if (*confirmed) {
    ASSERT_EQ(rows.size(), static_cast<size_t>(points + 2 * kConfirmPairs + 2))
        << "tuning did not finish";
    std::vector<double> ratios;
    for (int pair = 0; pair < kConfirmPairs; ++pair) {
      double candidate = 0;
      double incumbent = 0;
      for (int k = 0; k < 2; ++k) {
        const Row& row = rows[points + 2 * pair + k];
        const bool isCandidate = (k == 0) == (pair % 2 == 0);
        EXPECT_EQ(row.point, isCandidate ? "confirm_candidate" : "confirm_incumbent");
        EXPECT_TRUE(samePoint(row, isCandidate ? *top : rows[0])) << row.point;
        EXPECT_GT(row.score, 0.0);
        (isCandidate ? candidate : incumbent) = row.score;
      }
      ratios.push_back(candidate / incumbent);
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios[kConfirmPairs / 2];
    const Row& ratio = rows[points + 2 * kConfirmPairs];
    EXPECT_EQ(ratio.point, "confirm_ratio");
    EXPECT_TRUE(samePoint(ratio, *top));
    EXPECT_NEAR(ratio.score, median, 1e-5 * median);  // 6 digits in the log
    if (ratio.score <= 1.01 || ratios.front() <= 1) kept = &rows[0];
  } else {
    ASSERT_EQ(rows.size(), static_cast<size_t>(points + 1)) << "tuning did not finish";
  }
  const Row& best = rows.back();
  EXPECT_EQ(best.point, "best");
  EXPECT_TRUE(samePoint(best, *kept));
  EXPECT_EQ(best.score, kept->score);
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

// The configured values are slowed down (200 ms a step), so the best point scored is another
// one, and the confirmation runs and keeps it.
TEST(RuntimeAutotune, RanksSwitchTogetherAndTheLogRecordsTheConfirmedPoint) {
  const std::string path = logPath("autotune");
  const int points = 7;  // the configured values, Horovod's 4 seeds, 2 proposals
  Job job(kRanks, testConfig({{"ZEN_AUTOTUNE", "1"},
                              {"ZEN_AUTOTUNE_LOG", path},
                              {"ZEN_AUTOTUNE_WARMUP_SAMPLES", "1"},
                              {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                              {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", std::to_string(points)}}));
  ASSERT_EQ(job.size(), kRanks);
  runSteps(job, /*slowConfigured=*/true);

  std::string header;
  const std::vector<Row> rows = readLog(path, &header);
  EXPECT_EQ(header, "point,fusion_threshold_bytes,cycle_time_ms,bytes_per_second");
  ASSERT_GE(rows.size(), static_cast<size_t>(points + 1)) << "tuning did not finish";
  // The configured values first (Horovod's defaults), then other points.
  EXPECT_EQ(rows[0].point, "0");
  EXPECT_EQ(rows[0].fusionBytes, kConfigured.fusionThresholdBytes);
  EXPECT_EQ(rows[0].cycleMs, kConfigured.cycleTimeMs);
  std::set<std::pair<int64_t, double>> distinct;
  for (int i = 0; i < points; ++i) {
    EXPECT_GT(rows[i].score, 0.0) << "point " << i;
    distinct.insert({rows[i].fusionBytes, rows[i].cycleMs});
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(points));
  bool confirmed = false;
  expectTheChoice(rows, points, &confirmed);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  ASSERT_TRUE(confirmed) << "the slowed configured values scored best";
  const Row& best = rows.back();
  EXPECT_FALSE(samePoint(best, rows[0])) << "the confirmation kept the slowed configured values";
  expectRanksOnTheBest(job, best);
  // One plan per point after the first; one to the candidate unless it was the last point; one
  // per pair (A B, B A, A B: a switch inside each); one to the point kept, the candidate, as
  // the last pair ends on the incumbent.
  const bool candidateWasLast = samePoint(best, rows[points - 1]);
  const RuntimeStats s = job.rank(0).stats();
  EXPECT_EQ(s.parameterUpdates,
            static_cast<uint64_t>(points - 1 + (candidateWasLast ? 0 : 1) + kConfirmPairs + 1));
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
  bool confirmed = false;
  expectTheChoice(rows, 3, &confirmed);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
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
  bool confirmed = false;
  expectTheChoice(rows, 3, &confirmed);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
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
