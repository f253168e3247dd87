// The autotuner's ParameterManager, driven by a synthetic clock and synthetic plans: a step
// takes a time that depends on the parameters in effect (best at 16 MiB / 5 ms), so every
// score is known in closed form. The confirmation's tests give some points their own step
// times and let the scores drift linearly in time, as measured runs did (docs/BENCHMARKS.md).

#include "controller/parameter_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "controller/channel_negotiator.h"

namespace zen::controller {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
const TunedParameters kDefaults{128 * kMiB, 1.0};

// Seconds per training step: 10 ms at 16 MiB / 5 ms, more away from it.
double stepSeconds(const TunedParameters& p) {
  const double mib = static_cast<double>(p.fusionThresholdBytes) / kMiB;
  const double f = std::log2(mib + 1) - std::log2(17.0);
  const double c = (p.cycleTimeMs - 5) / 20;
  return 0.01 * (1 + f * f / 4 + c * c);
}

Response allreduce(std::vector<std::string> names, std::vector<TensorShape> shapes) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = DataType::kFloat32;
  r.tensorNames = std::move(names);
  r.shapes = std::move(shapes);
  return r;
}

// One training step's plan: "a" (1000 x 1000 float32) and "b" (250 float32) fused.
ResponseList stepPlan() {
  ResponseList plan;
  plan.responses.push_back(allreduce({"a", "b"}, {{1000, 1000}, {250}}));
  return plan;
}
constexpr double kStepBytes = 4e6 + 1000;

double expectedScore(const TunedParameters& p) {
  return kStepBytes / stepSeconds(p);
}

// The job: every update() comes one step after the last; parameters update() returns are
// applied at once (as the negotiator does when every rank has finished that plan). A step
// takes stepTime(parameters in effect), divided by 1 + drift * (seconds since the start): the
// scores of every point rise linearly in time.
struct Job {
  explicit Job(ParameterManager& manager) : pm(manager) {}

  std::optional<TunedParameters> step(const ResponseList& plan = stepPlan()) {
    ++calls;
    const double speedup = 1 + drift * secondsBetween(start, now);
    now += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(stepTime(pm.current()) / speedup));
    auto next = pm.update(plan, now);
    if (next) {
      returned.push_back(*next);
      if (applyAtOnce) pm.applied(now);
    }
    return next;
  }
  // Steps until update() returns parameters (at most `limit` steps); the steps taken.
  int stepUntilChange(int limit) {
    for (int i = 1; i <= limit; ++i) {
      if (step()) return i;
    }
    return -1;
  }
  void runToTheEnd() {
    for (int i = 0; i < 100000 && !pm.done(); ++i) step();
    ASSERT_TRUE(pm.done());
  }

  ParameterManager& pm;
  const TimePoint start = TimePoint{} + std::chrono::seconds(1000);
  TimePoint now = start;
  std::function<double(const TunedParameters&)> stepTime = stepSeconds;
  double drift = 0;  // per second
  int calls = 0;
  bool applyAtOnce = true;
  std::vector<TunedParameters> returned;
};

std::unique_ptr<ParameterManager> make(const AutotuneOptions& options) {
  auto result = ParameterManager::create(options);
  EXPECT_TRUE(result.isOk()) << result.status().toString();
  return result.isOk() ? std::move(result).value() : nullptr;
}

// The search alone, kept best directly (Horovod's choice); the confirmation's tests set
// confirmPairs.
AutotuneOptions options(int warmup, int steps, int maxSamples) {
  AutotuneOptions o;
  o.initial = kDefaults;
  o.warmupSamples = warmup;
  o.stepsPerSample = steps;
  o.maxSamples = maxSamples;
  o.confirmPairs = 0;
  return o;
}

TunedParameters params(double mib, double ms) {
  return TunedParameters{static_cast<int64_t>(mib * kMiB), ms};
}

TEST(ParameterManager, WarmupAndSampleBoundariesAreExact) {
  auto pm = make(options(2, 4, 20));
  Job job(*pm);
  // The first call starts the first sample; 2 warm-up samples and 3 scored ones of 4 steps.
  EXPECT_EQ(job.stepUntilChange(1000), 1 + (2 + 3) * 4);
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_EQ(pm->scored()[0].first, kDefaults);
  EXPECT_NEAR(pm->scored()[0].second, expectedScore(kDefaults), 1e-6 * expectedScore(kDefaults));
  EXPECT_EQ(pm->current(), params(4, 5));
  // No warm-up after the start: 3 samples of 4 steps from applied().
  EXPECT_EQ(job.stepUntilChange(1000), 3 * 4);
  ASSERT_EQ(pm->scored().size(), 2u);
  EXPECT_NEAR(pm->scored()[1].second, expectedScore(params(4, 5)),
              1e-6 * expectedScore(params(4, 5)));
}

TEST(ParameterManager, ASampleEndsWhenAnyNameReachesTheSteps) {
  // "a" every step, "b" every other: "a" ends each sample after 3 steps; bytes count both.
  auto pm = make(options(0, 3, 20));
  Job job(*pm);
  ResponseList withB = stepPlan();
  ResponseList withoutB;
  withoutB.responses.push_back(allreduce({"a"}, {{1000, 1000}}));
  job.step(withB);  // starts the sample, not counted
  int steps = 0;
  std::optional<TunedParameters> next;
  double bytes = 0;
  while (!next && steps < 100) {
    const ResponseList& plan = steps % 2 == 0 ? withoutB : withB;
    bytes += steps % 2 == 0 ? 4e6 : kStepBytes;
    next = job.step(plan);
    ++steps;
  }
  EXPECT_EQ(steps, 3 * 3);
  // Each sample: 3 steps of the same parameters; samples 1 and 3 have b once, sample 2 twice.
  const double t = 3 * stepSeconds(kDefaults);
  const std::vector<double> samples = {(2 * 4e6 + kStepBytes) / t, (4e6 + 2 * kStepBytes) / t,
                                       (2 * 4e6 + kStepBytes) / t};
  EXPECT_NEAR(bytes, 9 * 4e6 + 4 * 1000, 1e-9);
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_NEAR(pm->scored()[0].second, samples[0], 1e-6 * samples[0]);  // the median
}

TEST(ParameterManager, APointScoresTheMedianOfItsSamples) {
  // One step per sample, timed by hand: 1 s, 10 s, 2 s. The median is 2 s (the mean would
  // be 4.33 s); a sample of no time counts as 1e-9 s.
  auto pm = make(options(0, 1, 5));
  const ResponseList plan = stepPlan();
  TimePoint t = TimePoint{} + std::chrono::seconds(1000);
  EXPECT_FALSE(pm->update(plan, t));
  EXPECT_FALSE(pm->update(plan, t += std::chrono::seconds(1)));
  EXPECT_FALSE(pm->update(plan, t += std::chrono::seconds(10)));
  ASSERT_TRUE(pm->update(plan, t += std::chrono::seconds(2)));
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_DOUBLE_EQ(pm->scored()[0].second, kStepBytes / 2);
  pm->applied(t);
  for (int i = 0; i < 3; ++i) pm->update(plan, t);
  ASSERT_EQ(pm->scored().size(), 2u);
  EXPECT_DOUBLE_EQ(pm->scored()[1].second, kStepBytes / 1e-9);
}

TEST(ParameterManager, InitialThenSeedsThenProposalsThenTheBest) {
  auto pm = make(options(3, 10, 20));
  Job job(*pm);
  job.runToTheEnd();
  const auto& scored = pm->scored();
  ASSERT_EQ(scored.size(), 20u);
  EXPECT_EQ(scored[0].first, kDefaults);
  EXPECT_EQ(scored[1].first, params(4, 5));
  EXPECT_EQ(scored[2].first, params(32, 50));
  EXPECT_EQ(scored[3].first, params(16, 25));
  EXPECT_EQ(scored[4].first, params(8, 10));
  std::set<std::pair<int64_t, double>> distinct;
  for (const auto& [p, score] : scored) {
    EXPECT_NEAR(score, expectedScore(p), 1e-6 * score);
    EXPECT_GE(p.fusionThresholdBytes, 0);
    EXPECT_LE(p.fusionThresholdBytes, 128 * kMiB);
    EXPECT_EQ(p.fusionThresholdBytes % 1024, 0);
    EXPECT_GE(p.cycleTimeMs, 1.0);
    EXPECT_LE(p.cycleTimeMs, 100.0);
    EXPECT_NEAR(p.cycleTimeMs * 10, std::round(p.cycleTimeMs * 10), 1e-9);
    EXPECT_TRUE(distinct.insert({p.fusionThresholdBytes, p.cycleTimeMs}).second)
        << p.fusionThresholdBytes << " B, " << p.cycleTimeMs << " ms scored twice";
  }
  const auto best =
      std::max_element(scored.begin(), scored.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(pm->current(), best->first);
  EXPECT_EQ(job.returned.back(), best->first);
  EXPECT_EQ(job.returned.size(), 20u);  // 19 next points, then the best
  // The proposals improve on every fixed starting point (how close they come to the optimum
  // is the optimizer's business: test/controller/bayesian_optimization_test.cc).
  const auto bestStart =
      std::max_element(scored.begin(), scored.begin() + 5,
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_GT(best->second, bestStart->second);
  EXPECT_GE(best - scored.begin(), 5);
  // Exactly: the first call, 3 warm-up samples, 3 samples per point, 10 steps each.
  EXPECT_EQ(job.calls, 1 + (3 + 3 * 20) * 10);
  // Done: nothing more, whatever comes.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(job.step().has_value());
  EXPECT_EQ(pm->scored().size(), 20u);
}

TEST(ParameterManager, DeterministicForASeed) {
  auto a = make(options(0, 2, 12));
  auto b = make(options(0, 2, 12));
  Job ja(*a);
  Job jb(*b);
  ja.runToTheEnd();
  jb.runToTheEnd();
  EXPECT_EQ(ja.returned, jb.returned);
}

TEST(ParameterManager, NothingIsSampledUntilApplied) {
  auto pm = make(options(0, 2, 20));
  Job job(*pm);
  job.applyAtOnce = false;
  ASSERT_EQ(job.stepUntilChange(100), 1 + 3 * 2);
  ASSERT_EQ(pm->current(), params(4, 5));
  // The ranks take long to switch: these slow steps must not count.
  for (int i = 0; i < 50; ++i) {
    job.now += std::chrono::seconds(100);
    EXPECT_FALSE(job.step().has_value());
  }
  EXPECT_EQ(pm->scored().size(), 1u);
  pm->applied(job.now);
  EXPECT_EQ(job.stepUntilChange(100), 3 * 2);
  ASSERT_EQ(pm->scored().size(), 2u);
  EXPECT_NEAR(pm->scored()[1].second, expectedScore(params(4, 5)),
              1e-6 * expectedScore(params(4, 5)));
  // applied() when nothing is pending changes nothing.
  job.applyAtOnce = true;
  pm->applied(job.now);
  pm->applied(job.now);
  EXPECT_EQ(job.stepUntilChange(100), 3 * 2);
}

TEST(ParameterManager, FixedFusionThresholdNeverMoves) {
  AutotuneOptions o = options(0, 1, 10);
  o.initial = params(64, 1);
  o.tuneFusionThreshold = false;
  auto pm = make(o);
  Job job(*pm);
  job.runToTheEnd();
  ASSERT_EQ(pm->scored().size(), 10u);
  std::vector<double> cycles;
  for (const auto& [p, score] : pm->scored()) {
    EXPECT_EQ(p.fusionThresholdBytes, 64 * kMiB);
    cycles.push_back(p.cycleTimeMs);
  }
  EXPECT_EQ(std::vector<double>(cycles.begin(), cycles.begin() + 5),
            (std::vector<double>{1, 5, 50, 25, 10}));
  EXPECT_EQ(pm->current().fusionThresholdBytes, 64 * kMiB);
  for (const TunedParameters& p : job.returned) EXPECT_EQ(p.fusionThresholdBytes, 64 * kMiB);
}

TEST(ParameterManager, FixedCycleTimeNeverMoves) {
  AutotuneOptions o = options(0, 1, 10);
  o.initial = params(128, 0.5);  // a fixed knob may lie outside the search range
  o.tuneCycleTime = false;
  auto pm = make(o);
  Job job(*pm);
  job.runToTheEnd();
  ASSERT_EQ(pm->scored().size(), 10u);
  std::vector<int64_t> fusions;
  for (const auto& [p, score] : pm->scored()) {
    EXPECT_EQ(p.cycleTimeMs, 0.5);
    fusions.push_back(p.fusionThresholdBytes);
  }
  EXPECT_EQ(std::vector<int64_t>(fusions.begin(), fusions.begin() + 5),
            (std::vector<int64_t>{128 * kMiB, 4 * kMiB, 32 * kMiB, 16 * kMiB, 8 * kMiB}));
  EXPECT_EQ(pm->current().cycleTimeMs, 0.5);
}

TEST(ParameterManager, BothFixedIsDoneAtOnce) {
  AutotuneOptions o = options(0, 1, 10);
  o.tuneFusionThreshold = false;
  o.tuneCycleTime = false;
  auto pm = make(o);
  EXPECT_TRUE(pm->done());
  Job job(*pm);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(job.step().has_value());
  EXPECT_TRUE(pm->scored().empty());
  EXPECT_EQ(pm->current(), kDefaults);
}

TEST(ParameterManager, ASeedEqualToTheInitialPointIsSkipped) {
  AutotuneOptions o = options(0, 1, 6);
  o.initial = params(16, 25);
  auto pm = make(o);
  Job job(*pm);
  job.runToTheEnd();
  const auto& s = pm->scored();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].first, params(16, 25));
  EXPECT_EQ(s[1].first, params(4, 5));
  EXPECT_EQ(s[2].first, params(32, 50));
  EXPECT_EQ(s[3].first, params(8, 10));  // (16, 25) was scored already
}

TEST(ParameterManager, OnlyTheGlobalSetsDataPlaneCounts) {
  // Beside the step's allreduce, responses that must not count, twice each per plan (had
  // their names counted, samples would end after half the steps).
  ResponseList plan = stepPlan();
  for (ResponseType type : {ResponseType::kJoin, ResponseType::kBarrier, ResponseType::kError,
                            ResponseType::kAddProcessSet, ResponseType::kRemoveProcessSet}) {
    Response r = allreduce({"x"}, {{1 << 20}});
    r.type = type;
    plan.responses.push_back(r);
    plan.responses.push_back(r);
  }
  Response otherSet = allreduce({"y"}, {{1 << 20}});
  otherSet.processSet = 1;
  plan.responses.push_back(otherSet);
  plan.responses.push_back(otherSet);
  auto pm = make(options(1, 4, 5));
  Job job(*pm);
  job.step(plan);
  int steps = 1;
  while (!job.step(plan) && steps < 1000) ++steps;
  EXPECT_EQ(steps, (1 + 3) * 4);
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_NEAR(pm->scored()[0].second, expectedScore(kDefaults), 1e-6 * expectedScore(kDefaults));
}

TEST(ParameterManager, EveryDataPlaneTypeCounts) {
  ResponseList plan;
  int64_t bytes = 0;
  for (ResponseType type :
       {ResponseType::kSparseAllreduce, ResponseType::kAllreduce, ResponseType::kAllgather,
        ResponseType::kBroadcast, ResponseType::kAlltoall, ResponseType::kReducescatter}) {
    Response r = allreduce({fmt::format("t{}", static_cast<int>(type))}, {{100, 10}});
    r.type = type;
    plan.responses.push_back(r);
    bytes += denseBytes(r, 0);
  }
  ASSERT_EQ(bytes, 6 * 4000);
  auto pm = make(options(0, 1, 5));
  Job job(*pm);
  for (int i = 0; i < 4; ++i) job.step(plan);
  ASSERT_EQ(pm->scored().size(), 1u);
  const double expected = bytes / stepSeconds(kDefaults);
  EXPECT_NEAR(pm->scored()[0].second, expected, 1e-6 * expected);
}

TEST(ParameterManager, ASampleWithoutBytesScoresZero) {
  ResponseList empty;
  empty.responses.push_back(allreduce({"a"}, {{0, 16}}));
  auto pm = make(options(0, 1, 5));
  Job job(*pm);
  for (int i = 0; i < 4; ++i) job.step(empty);
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_EQ(pm->scored()[0].second, 0.0);
}

TEST(ParameterManager, OneSampleOnlyKeepsTheInitialPoint) {
  auto pm = make(options(0, 1, 1));
  Job job(*pm);
  job.runToTheEnd();
  ASSERT_EQ(pm->scored().size(), 1u);
  EXPECT_TRUE(job.returned.empty());  // the best is what runs already
  EXPECT_EQ(pm->current(), kDefaults);
}

TEST(ParameterManager, RefusesInvalidOptions) {
  struct Case {
    AutotuneOptions options;
    StatusCode code;
    std::string says;
  };
  std::vector<Case> cases;
  auto add = [&](auto change, StatusCode code, std::string says) {
    AutotuneOptions o = options(3, 10, 20);
    change(o);
    cases.push_back(Case{o, code, std::move(says)});
  };
  add([](AutotuneOptions& o) { o.warmupSamples = -1; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_WARMUP_SAMPLES must be >= 0, got -1");
  add([](AutotuneOptions& o) { o.stepsPerSample = 0; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_STEPS_PER_SAMPLE must be >= 1, got 0");
  add([](AutotuneOptions& o) { o.maxSamples = 0; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES must be >= 1, got 0");
  add([](AutotuneOptions& o) { o.gaussianProcessNoise = 0; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE must be > 0, got 0");
  add([](AutotuneOptions& o) { o.gaussianProcessNoise = NAN; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE must be > 0, got nan");
  add([](AutotuneOptions& o) { o.confirmPairs = -1; }, StatusCode::kInvalidArgument,
      "ZEN_AUTOTUNE_CONFIRM_PAIRS must be >= 0, got -1");
  add([](AutotuneOptions& o) { o.initial.fusionThresholdBytes = -1; }, StatusCode::kInvalidArgument,
      "initial fusion threshold must be >= 0 bytes, got -1");
  add([](AutotuneOptions& o) { o.initial.cycleTimeMs = -2; }, StatusCode::kInvalidArgument,
      "initial cycle time must be >= 0 ms, got -2");
  add([](AutotuneOptions& o) { o.logPath = "/nonexistent-zen-dir/tune.csv"; }, StatusCode::kIoError,
      "cannot open the autotune log '/nonexistent-zen-dir/tune.csv'");
  for (const Case& c : cases) {
    auto result = ParameterManager::create(c.options);
    ASSERT_FALSE(result.isOk()) << c.says;
    EXPECT_EQ(result.status().code(), c.code) << result.status().toString();
    EXPECT_NE(result.status().message().find(c.says), std::string::npos)
        << result.status().toString();
  }
}

TEST(ParameterManager, ATunedStartOutsideTheRangeIsTheFirstPoint) {
  AutotuneOptions o = options(0, 1, 8);
  o.initial = params(128, 0.5);
  auto pm = make(o);
  Job job(*pm);
  job.runToTheEnd();
  EXPECT_EQ(pm->scored()[0].first, params(128, 0.5));
  for (size_t i = 1; i < pm->scored().size(); ++i) {
    EXPECT_GE(pm->scored()[i].first.cycleTimeMs, 1.0);
  }
}

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A log file of this process: ctest -j runs other processes of these tests at once.
std::string logPath(const char* name) {
  return ::testing::TempDir() + name + std::to_string(getpid()) + ".csv";
}

TEST(ParameterManager, WritesTheLog) {
  const std::string path = logPath("zen_autotune_log_test");
  std::remove(path.c_str());
  AutotuneOptions o = options(1, 2, 6);
  o.logPath = path;
  auto pm = make(o);
  EXPECT_EQ(readLines(path), std::vector<std::string>{
                                 "point,fusion_threshold_bytes,cycle_time_ms,bytes_per_second"});
  Job job(*pm);
  job.stepUntilChange(100);
  // Flushed as soon as scored.
  const auto first = readLines(path);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1], fmt::format("0,134217728,1,{:.6g}", expectedScore(kDefaults)));
  job.runToTheEnd();
  const auto lines = readLines(path);
  ASSERT_EQ(lines.size(), 1u + 6u + 1u);
  const auto& scored = pm->scored();
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(lines[1 + i],
              fmt::format("{},{},{:.6g},{:.6g}", i, scored[i].first.fusionThresholdBytes,
                          scored[i].first.cycleTimeMs, scored[i].second));
  }
  EXPECT_EQ(lines[2], fmt::format("1,4194304,5,{:.6g}", expectedScore(params(4, 5))));
  EXPECT_EQ(lines[3], fmt::format("2,33554432,50,{:.6g}", expectedScore(params(32, 50))));
  const auto best =
      std::max_element(scored.begin(), scored.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(lines.back(), fmt::format("best,{},{:.6g},{:.6g}", best->first.fusionThresholdBytes,
                                      best->first.cycleTimeMs, best->second));
  std::remove(path.c_str());
}

// The confirmation. Five points (the configured values and Horovod's seeds), 3 samples of 2
// steps each, then confirmPairs pairs of one sample each.
AutotuneOptions confirming(int pairs) {
  AutotuneOptions o = options(0, 2, 5);
  o.confirmPairs = pairs;
  return o;
}

// Step times: the configured values 10 ms, `point` `seconds`, the other seeds 11 ms.
std::function<double(const TunedParameters&)> oneBetter(const TunedParameters& point,
                                                        double seconds) {
  return [point, seconds](const TunedParameters& p) {
    return p == point ? seconds : p == kDefaults ? 0.010 : 0.011;
  };
}

std::unique_ptr<ParameterManager> runWith(const AutotuneOptions& o,
                                          const std::function<double(const TunedParameters&)>& f,
                                          double drift) {
  auto pm = make(o);
  Job job(*pm);
  job.stepTime = f;
  job.drift = drift;
  job.runToTheEnd();
  return pm;
}

TEST(ParameterManager, ConfirmationKeepsTheTrulyBetterPointWhereDriftMisleadsTheBestScore) {
  // (8, 10) is 4 % slower than the configured values; the scores rise by 100 % a second, about
  // 2 % a sample. (8, 10), scored last, takes the best score of the search.
  const auto f = oneBetter(params(8, 10), 0.0104);
  ASSERT_GT(f(params(8, 10)), f(kDefaults));
  const auto plain = runWith(confirming(0), f, 1.0);
  const auto confirmed = runWith(confirming(3), f, 1.0);
  // The same search in both; the best score is the worse point's.
  EXPECT_EQ(plain->scored(), confirmed->scored());
  const auto& scored = plain->scored();
  ASSERT_EQ(scored.size(), 5u);
  EXPECT_EQ(scored[4].first, params(8, 10));
  for (size_t i = 0; i < 4; ++i) EXPECT_GT(scored[4].second, scored[i].second) << i;
  // Plain: kept. Confirmed: it loses its pairs, the configured values are kept.
  EXPECT_EQ(plain->current(), params(8, 10));
  EXPECT_EQ(plain->confirmation(), nullptr);
  ASSERT_NE(confirmed->confirmation(), nullptr);
  EXPECT_EQ(confirmed->confirmation()->candidate(), params(8, 10));
  EXPECT_LT(confirmed->confirmation()->medianRatio(), 1.0);
  EXPECT_EQ(confirmed->current(), kDefaults);
  EXPECT_TRUE(confirmed->done());
}

TEST(ParameterManager, ConfirmationKeepsACandidateThatIsTrulyBetterUnderDrift) {
  // The same drift, (8, 10) 5 % faster than the configured values: both keep it.
  const auto f = oneBetter(params(8, 10), 0.0095);
  const auto plain = runWith(confirming(0), f, 1.0);
  const auto confirmed = runWith(confirming(3), f, 1.0);
  EXPECT_EQ(plain->current(), params(8, 10));
  ASSERT_NE(confirmed->confirmation(), nullptr);
  EXPECT_GT(confirmed->confirmation()->medianRatio(), 1 + AutotuneConfirmation::kConfirmMargin);
  EXPECT_EQ(confirmed->current(), params(8, 10));
  // The drift's share alternates with the order: pairs 0 and 2 (candidate first) see the
  // candidate earlier, slower, than pair 1.
  const std::vector<double> r = confirmed->confirmation()->ratios();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_LT(r[0], 0.010 / 0.0095);
  EXPECT_GT(r[1], 0.010 / 0.0095);
  EXPECT_LT(r[2], 0.010 / 0.0095);
}

TEST(ParameterManager, ConfirmationRunsABBAWithExactSampleCounts) {
  // No drift; (16, 25), point 3, is the best; the search ends on (8, 10).
  auto pm = make(confirming(3));
  Job job(*pm);
  job.stepTime = oneBetter(params(16, 25), 0.0095);
  // The search: the first call, then 3 samples of 2 steps per point.
  EXPECT_EQ(job.stepUntilChange(1000), 1 + 3 * 2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(job.stepUntilChange(1000), 3 * 2);
  // After the last point, the candidate at once: A | B B | A A | B, each switch followed by
  // one discarded sample (s): s A | s B B | s A A | s B, then after the last the point kept.
  EXPECT_EQ(job.stepUntilChange(1000), 3 * 2);
  ASSERT_NE(pm->confirmation(), nullptr);
  EXPECT_EQ(pm->scored().size(), 5u);
  EXPECT_EQ(pm->current(), params(16, 25));
  EXPECT_EQ(job.stepUntilChange(1000), 2 * 2);
  EXPECT_EQ(pm->current(), kDefaults);
  EXPECT_EQ(pm->confirmation()->samples().size(), 1u);
  EXPECT_EQ(job.stepUntilChange(1000), 3 * 2);
  EXPECT_EQ(pm->current(), params(16, 25));
  EXPECT_EQ(job.stepUntilChange(1000), 3 * 2);
  EXPECT_EQ(pm->current(), kDefaults);
  EXPECT_FALSE(pm->done());
  EXPECT_EQ(job.stepUntilChange(1000), 2 * 2);
  EXPECT_TRUE(pm->done());
  EXPECT_EQ(pm->current(), params(16, 25));
  EXPECT_EQ(job.calls, 1 + (5 * 3 + 4 + 6) * 2);
  const std::vector<TunedParameters> tail(job.returned.end() - 5, job.returned.end());
  EXPECT_EQ(tail, (std::vector<TunedParameters>{params(16, 25), kDefaults, params(16, 25),
                                                kDefaults, params(16, 25)}));
  // The samples, in order, each its point's closed-form score.
  const auto& samples = pm->confirmation()->samples();
  const std::vector<TunedParameters> order = {params(16, 25), kDefaults,      kDefaults,
                                              params(16, 25), params(16, 25), kDefaults};
  ASSERT_EQ(samples.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(samples[i].first, order[i]) << i;
    const double want = kStepBytes / job.stepTime(order[i]);
    EXPECT_NEAR(samples[i].second, want, 1e-6 * want) << i;
  }
  for (double r : pm->confirmation()->ratios()) EXPECT_NEAR(r, 0.010 / 0.0095, 1e-6);
  // Done: nothing more.
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(job.step().has_value());
  EXPECT_EQ(pm->confirmation()->samples().size(), 6u);
}

TEST(ParameterManager, ACandidateWithinTheMarginIsNotKept) {
  // No drift: (8, 10) scores best, 0.5 % better (inside the margin) or 2 % (outside).
  const auto tie = runWith(confirming(3), oneBetter(params(8, 10), 0.010 / 1.005), 0);
  ASSERT_NE(tie->confirmation(), nullptr);
  EXPECT_NEAR(tie->confirmation()->medianRatio(), 1.005, 1e-6);
  EXPECT_EQ(tie->current(), kDefaults);
  const auto win = runWith(confirming(3), oneBetter(params(8, 10), 0.010 / 1.02), 0);
  ASSERT_NE(win->confirmation(), nullptr);
  EXPECT_NEAR(win->confirmation()->medianRatio(), 1.02, 1e-6);
  EXPECT_EQ(win->current(), params(8, 10));
}

TEST(ParameterManager, ACandidateThatIsTheConfiguredValuesSkipsTheConfirmation) {
  auto pm = make(confirming(3));
  Job job(*pm);
  job.stepTime = oneBetter(params(8, 10), 0.012);  // the configured values are the fastest
  job.runToTheEnd();
  EXPECT_EQ(pm->confirmation(), nullptr);
  EXPECT_EQ(pm->current(), kDefaults);
  EXPECT_EQ(job.calls, 1 + 5 * 3 * 2);
  EXPECT_EQ(job.returned.back(), kDefaults);
}

TEST(ParameterManager, TheConfirmationDiscardsTheSampleAfterASwitch) {
  // One step per sample, and the step right after a switch 10 times slower (the previous
  // point's tail). The candidate (16, 25) is not the last point: A | B B | A. Had the sample
  // after a switch counted, pair 1's A would carry it and pair 1's B not: ratios 1.05 and
  // 0.105, the candidate lost.
  AutotuneOptions o = confirming(2);
  o.stepsPerSample = 1;
  auto pm = make(o);
  Job job(*pm);
  std::optional<TunedParameters> last;
  job.stepTime = [&](const TunedParameters& p) {
    const bool switched = last && *last != p;
    last = p;
    return (p == params(16, 25) ? 0.0095 : p == kDefaults ? 0.010 : 0.011) * (switched ? 10 : 1);
  };
  job.runToTheEnd();
  ASSERT_NE(pm->confirmation(), nullptr);
  const auto& samples = pm->confirmation()->samples();
  ASSERT_EQ(samples.size(), 4u);
  const std::vector<double> seconds = {0.0095, 0.010, 0.010, 0.0095};
  for (size_t i = 0; i < samples.size(); ++i) {
    const double want = kStepBytes / seconds[i];
    EXPECT_NEAR(samples[i].second, want, 1e-6 * want) << i;
  }
  EXPECT_EQ(pm->current(), params(16, 25));
}

TEST(ParameterManager, TheConfirmationLeavesAFixedKnobAlone) {
  AutotuneOptions o = confirming(2);
  o.initial = params(64, 1);
  o.tuneFusionThreshold = false;
  auto pm = make(o);
  Job job(*pm);
  job.stepTime = [](const TunedParameters& p) { return p.cycleTimeMs == 10 ? 0.009 : 0.010; };
  job.runToTheEnd();
  ASSERT_NE(pm->confirmation(), nullptr);
  EXPECT_EQ(pm->confirmation()->samples().size(), 4u);
  for (const auto& [p, score] : pm->confirmation()->samples()) {
    EXPECT_EQ(p.fusionThresholdBytes, 64 * kMiB);
  }
  for (const TunedParameters& p : job.returned) EXPECT_EQ(p.fusionThresholdBytes, 64 * kMiB);
  EXPECT_EQ(pm->current(), params(64, 10));
}

TEST(ParameterManager, WritesTheConfirmationToTheLog) {
  const std::string path = logPath("zen_autotune_confirm_log_test");
  std::remove(path.c_str());
  AutotuneOptions o = confirming(3);
  o.logPath = path;
  auto pm = make(o);
  Job job(*pm);
  job.stepTime = oneBetter(params(16, 25), 0.0095);
  job.runToTheEnd();
  ASSERT_NE(pm->confirmation(), nullptr);
  const auto lines = readLines(path);
  ASSERT_EQ(lines.size(), 1u + 5u + 6u + 1u + 1u);
  const auto& scored = pm->scored();
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(lines[1 + i],
              fmt::format("{},{},{:.6g},{:.6g}", i, scored[i].first.fusionThresholdBytes,
                          scored[i].first.cycleTimeMs, scored[i].second));
  }
  const auto& samples = pm->confirmation()->samples();
  const char* candidate = "confirm_candidate,16777216,25";
  const char* incumbent = "confirm_incumbent,134217728,1";
  const std::vector<const char*> order = {candidate, incumbent, incumbent,
                                          candidate, candidate, incumbent};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(lines[6 + i], fmt::format("{},{:.6g}", order[i], samples[i].second));
  }
  EXPECT_EQ(lines[12], fmt::format("confirm_ratio,16777216,25,{:.6g}", 0.010 / 0.0095));
  // The point kept, with its score from the search (point 3).
  EXPECT_EQ(lines[13], fmt::format("best,16777216,25,{:.6g}", scored[3].second));
  std::remove(path.c_str());
}

TEST(ParameterManager, TheLogSaysWhenTheConfiguredValuesAreKept) {
  const std::string path = logPath("zen_autotune_confirm_kept_test");
  std::remove(path.c_str());
  AutotuneOptions o = confirming(1);
  o.logPath = path;
  auto pm = make(o);
  Job job(*pm);
  job.stepTime = oneBetter(params(8, 10), 0.010 / 1.005);
  job.runToTheEnd();
  const auto lines = readLines(path);
  ASSERT_EQ(lines.size(), 1u + 5u + 2u + 1u + 1u);
  const auto& samples = pm->confirmation()->samples();
  EXPECT_EQ(lines[6], fmt::format("confirm_candidate,8388608,10,{:.6g}", samples[0].second));
  EXPECT_EQ(lines[7], fmt::format("confirm_incumbent,134217728,1,{:.6g}", samples[1].second));
  EXPECT_EQ(lines[8], fmt::format("confirm_ratio,8388608,10,{:.6g}", 1.005));
  EXPECT_EQ(lines[9], fmt::format("best,134217728,1,{:.6g}", pm->scored()[0].second));
  std::remove(path.c_str());
}

TEST(ParameterManager, ConfirmPairsComeFromTheConfig) {
  EXPECT_EQ(AutotuneOptions{}.confirmPairs, 3);
  const auto config = Config::parse({{"ZEN_AUTOTUNE_CONFIRM_PAIRS", "5"}});
  ASSERT_TRUE(config.isOk()) << config.status().toString();
  EXPECT_EQ(autotuneOptionsFrom(config.value()).confirmPairs, 5);
  EXPECT_EQ(autotuneOptionsFrom(Config::parse({{"PATH", "/bin"}}).value()).confirmPairs, 3);
}

}  // namespace
}  // namespace zen::controller
