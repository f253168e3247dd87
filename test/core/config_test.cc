#include "core/config.h"

#include <gtest/gtest.h>

namespace zen {
namespace {

TEST(Config, DefaultsMatchTheDocumentedValues) {
  const auto c = Config::parse({{"PATH", "/bin"}, {"HOME", "/root"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().fusionThresholdBytes, 128 << 20);
  EXPECT_DOUBLE_EQ(c.value().cycleTimeMs, 1.0);
  EXPECT_EQ(c.value().cacheCapacity, 1024);
  EXPECT_EQ(c.value().hashFunctions, 3);
  EXPECT_EQ(c.value().scheme, Scheme::kAuto);
  EXPECT_FALSE(c.value().rank.has_value());
  EXPECT_FALSE(c.value().autotune);
  EXPECT_FALSE(c.value().fusionThresholdSet);
  EXPECT_FALSE(c.value().cycleTimeSet);
  EXPECT_EQ(c.value().autotuneWarmupSamples, 3);
  EXPECT_EQ(c.value().autotuneStepsPerSample, 10);
  EXPECT_EQ(c.value().autotuneMaxSamples, 20);
  EXPECT_DOUBLE_EQ(c.value().autotuneNoise, 0.8);
  EXPECT_EQ(c.value().autotuneConfirmPairs, 3);
  EXPECT_FALSE(c.value().logHideTime);
  EXPECT_FALSE(c.value().mpiThreadsDisable);
}

// Horovod's HOROVOD_AUTOTUNE* knobs; a knob set explicitly is fixed (not tuned).
TEST(Config, ParsesTheAutotuner) {
  const auto c = Config::parse({{"ZEN_AUTOTUNE", "1"},
                                {"ZEN_AUTOTUNE_LOG", "/tmp/tune.csv"},
                                {"ZEN_AUTOTUNE_WARMUP_SAMPLES", "0"},
                                {"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "4"},
                                {"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "7"},
                                {"ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.3"},
                                {"ZEN_AUTOTUNE_CONFIRM_PAIRS", "5"},
                                {"ZEN_CYCLE_TIME", "2"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_TRUE(c.value().autotune);
  EXPECT_EQ(c.value().autotuneLog, "/tmp/tune.csv");
  EXPECT_EQ(c.value().autotuneWarmupSamples, 0);
  EXPECT_EQ(c.value().autotuneStepsPerSample, 4);
  EXPECT_EQ(c.value().autotuneMaxSamples, 7);
  EXPECT_DOUBLE_EQ(c.value().autotuneNoise, 0.3);
  EXPECT_EQ(c.value().autotuneConfirmPairs, 5);
  EXPECT_TRUE(c.value().cycleTimeSet);
  EXPECT_FALSE(c.value().fusionThresholdSet);
  EXPECT_TRUE(Config::parse({{"ZEN_FUSION_THRESHOLD", "0"}}).value().fusionThresholdSet);
  // 0: no confirmation, Horovod's choice.
  EXPECT_EQ(Config::parse({{"ZEN_AUTOTUNE_CONFIRM_PAIRS", "0"}}).value().autotuneConfirmPairs, 0);
}

TEST(Config, ParsesEveryKnob) {
  const auto c = Config::parse({{"ZEN_RANK", "2"},
                                {"ZEN_SIZE", "4"},
                                {"ZEN_FUSION_THRESHOLD", "1048576"},
                                {"ZEN_CYCLE_TIME", "0.5"},
                                {"ZEN_SCHEME", "hc"},
                                {"ZEN_HASH_FUNCTIONS", "4"},
                                {"ZEN_AUTO_PROFILE_CALLS", "5"},
                                {"ZEN_HASH_MEMORY_FACTOR", "2"},
                                {"ZEN_TIMELINE", "/tmp/t.json"},
                                {"ZEN_TIMELINE_MARK_CYCLES", "1"},
                                {"ZEN_LOG_LEVEL", "debug"},
                                {"ZEN_LOG_HIDE_TIME", "1"},
                                {"ZEN_MPI_THREADS_DISABLE", "1"},
                                {"ZEN_TIMEOUT", "5"},
                                {"ZEN_CONTROLLER_FD", "7"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(*c.value().rank, 2);
  EXPECT_EQ(*c.value().size, 4);
  EXPECT_EQ(c.value().fusionThresholdBytes, 1 << 20);
  EXPECT_DOUBLE_EQ(c.value().cycleTimeMs, 0.5);
  EXPECT_EQ(c.value().scheme, Scheme::kHc);
  EXPECT_EQ(c.value().hashFunctions, 4);
  EXPECT_EQ(c.value().autoProfileCalls, 5);
  EXPECT_DOUBLE_EQ(c.value().hashMemoryFactor, 2.0);
  EXPECT_EQ(c.value().timeline, "/tmp/t.json");
  EXPECT_TRUE(c.value().timelineMarkCycles);
  EXPECT_EQ(c.value().logLevel, "debug");
  EXPECT_TRUE(c.value().logHideTime);
  EXPECT_TRUE(c.value().mpiThreadsDisable);
  EXPECT_DOUBLE_EQ(c.value().timeoutSeconds, 5.0);
  EXPECT_EQ(c.value().controllerFd, 7);
}

// zenrun's elastic mode sets these for zen.common.elastic_rendezvous; the library accepts and
// ignores them (an unknown ZEN_* name would make every rank refuse to start).
TEST(Config, AcceptsTheElasticLauncherVariables) {
  const auto c = Config::parse(
      {{"ZEN_ELASTIC_RENDEZVOUS", "127.0.0.1:4000"}, {"ZEN_ELASTIC_WORKER", "localhost/0/1"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_FALSE(c.value().rank.has_value());
  EXPECT_FALSE(Config::parse({{"ZEN_ELASTIC_BOGUS", "1"}}).isOk());
}

// ZEN_IFACE: Horovod's GLOO_IFACE, a comma-separated list (the first one is used).
TEST(Config, ParsesTheInterfaceList) {
  EXPECT_TRUE(Config::parse({}).value().ifaces.empty());
  const auto one = Config::parse({{"ZEN_IFACE", "eth1"}});
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  EXPECT_EQ(one.value().ifaces, std::vector<std::string>{"eth1"});
  const auto two = Config::parse({{"ZEN_IFACE", "ib0,eth0"}});
  ASSERT_TRUE(two.isOk()) << two.status().toString();
  EXPECT_EQ(two.value().ifaces, (std::vector<std::string>{"ib0", "eth0"}));
}

struct BadCase {
  const char* name;
  const char* value;
  const char* expect;  // a piece of the message
};

class ConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigRejects, WithAMessageNamingTheVariable) {
  const auto c = Config::parse({{GetParam().name, GetParam().value}});
  ASSERT_FALSE(c.isOk());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().expect), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    BadValues,
    ConfigRejects,
    ::testing::Values(
        BadCase{"ZEN_HASH_FUNCTIONS", "0", "ZEN_HASH_FUNCTIONS='0'"},
        BadCase{"ZEN_HASH_FUNCTIONS", "9", "[1, 8]"},
        BadCase{"ZEN_AUTO_PROFILE_CALLS", "-1", "[0, 1000]"},
        BadCase{"ZEN_CYCLE_TIME", "fast", "ZEN_CYCLE_TIME='fast'"},
        BadCase{"ZEN_FUSION_THRESHOLD", "-1", "ZEN_FUSION_THRESHOLD"},
        BadCase{"ZEN_FUSION_THRESHOLD", "12MB", "expected an integer"},
        BadCase{"ZEN_SCHEME", "omni", "expected auto, zen"},
        BadCase{"ZEN_LOG_LEVEL", "loud", "ZEN_LOG_LEVEL='loud'"},
        BadCase{"ZEN_TIMELINE_MARK_CYCLES", "maybe", "expected 0/1"},
        BadCase{"ZEN_LOG_HIDE_TIME", "on", "ZEN_LOG_HIDE_TIME='on'"},
        BadCase{"ZEN_MPI_THREADS_DISABLE", "2", "ZEN_MPI_THREADS_DISABLE='2'"},
        BadCase{"ZEN_FUSION_THRESHOLDD", "1", "unknown variable ZEN_FUSION_THRESHOLDD"},
        BadCase{"ZEN_RANK", "x", "ZEN_RANK='x'"},
        BadCase{"ZEN_CONTROLLER_FD", "-1", "ZEN_CONTROLLER_FD"},
        BadCase{"ZEN_AUTOTUNE", "on", "ZEN_AUTOTUNE='on'"},
        BadCase{"ZEN_IFACE", "", "ZEN_IFACE='': expected comma-separated"},
        BadCase{"ZEN_IFACE", "eth0,", "ZEN_IFACE='eth0,'"},
        BadCase{"ZEN_AUTOTUNE_STEPS_PER_SAMPLE", "0", "ZEN_AUTOTUNE_STEPS_PER_SAMPLE"},
        BadCase{"ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "0", "ZEN_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"},
        BadCase{"ZEN_AUTOTUNE_WARMUP_SAMPLES", "-1", "ZEN_AUTOTUNE_WARMUP_SAMPLES"},
        BadCase{"ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0", "ZEN_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"},
        BadCase{"ZEN_AUTOTUNE_CONFIRM_PAIRS", "-1",
                "ZEN_AUTOTUNE_CONFIRM_PAIRS='-1': expected an integer in [0, 1000000]"},
        BadCase{"ZEN_AUTOTUNE_CONFIRM_PAIRS", "two", "ZEN_AUTOTUNE_CONFIRM_PAIRS='two'"}));

// Horovod's variables (core/horovod_env.h): the error names the HOROVOD_* variable set.
INSTANTIATE_TEST_SUITE_P(
    HorovodAliases,
    ConfigRejects,
    ::testing::Values(
        BadCase{"HOROVOD_FUSION_THRESHOLD", "64MB", "HOROVOD_FUSION_THRESHOLD='64MB'"},
        BadCase{"HOROVOD_FUSION_THRESHOLD", "-1", "HOROVOD_FUSION_THRESHOLD='-1'"},
        BadCase{"HOROVOD_CYCLE_TIME", "fast", "HOROVOD_CYCLE_TIME='fast'"},
        BadCase{"HOROVOD_CACHE_CAPACITY", "-5", "HOROVOD_CACHE_CAPACITY='-5'"},
        BadCase{"HOROVOD_AUTOTUNE", "on", "HOROVOD_AUTOTUNE='on'"},
        BadCase{"HOROVOD_STALL_CHECK_DISABLE", "maybe", "HOROVOD_STALL_CHECK_DISABLE='maybe'"},
        BadCase{"HOROVOD_STALL_CHECK_TIME_SECONDS", "x", "HOROVOD_STALL_CHECK_TIME_SECONDS='x'"},
        BadCase{"HOROVOD_LOG_LEVEL", "loud", "HOROVOD_LOG_LEVEL='loud'"},
        BadCase{"HOROVOD_GLOO_IFACE", "eth0,", "HOROVOD_GLOO_IFACE='eth0,'"},
        BadCase{"HOROVOD_GLOO_TIMEOUT_SECONDS", "0", "HOROVOD_GLOO_TIMEOUT_SECONDS='0'"}));

TEST(Config, MpiPlacementComesFromTheLauncher) {
  auto c = Config::parse({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().mpiRank, 2);
  EXPECT_EQ(c.value().mpiSize, 4);
  EXPECT_FALSE(c.value().rank.has_value());
  c = Config::parse({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c.value().mpiRank, 1);
  c = Config::parse({{"PATH", "/bin"}});
  ASSERT_TRUE(c.isOk());
  EXPECT_FALSE(c.value().mpiSize.has_value());
  c = Config::parse({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("OMPI_COMM_WORLD_RANK=4"), std::string::npos);
}

TEST(Config, MpiLocalPlacementComesFromTheLauncher) {
  auto c = Config::parse({{"OMPI_COMM_WORLD_RANK", "3"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().mpiLocalRank, 1);
  EXPECT_EQ(c.value().mpiLocalSize, 2);
  c = Config::parse({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
  ASSERT_TRUE(c.isOk());
  EXPECT_FALSE(c.value().mpiLocalRank.has_value());
  c = Config::parse({{"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "3"}});
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c.value().mpiLocalSize, 3);
  c = Config::parse({{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("OMPI_COMM_WORLD_LOCAL_RANK=2"), std::string::npos);
}

TEST(Config, ScriptVariablesAreNotTheLibrarys) {
  const auto c = Config::parse({{"ZEN_BUILD_DIR", "/tmp/b"},
                                {"ZEN_BUILD_JOBS", "1"},
                                {"ZEN_FUZZ_SECONDS", "5"},
                                {"ZEN_DEMO_RANKS", "2"},
                                {"ZEN_SCHEME", "zen"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().scheme, Scheme::kZen);
  EXPECT_FALSE(Config::parse({{"ZEN_BUILDX", "1"}}).isOk());
}

TEST(Config, RankMustBeBelowSize) {
  const auto c = Config::parse({{"ZEN_RANK", "4"}, {"ZEN_SIZE", "4"}});
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("ZEN_RANK=4 is not below ZEN_SIZE=4"), std::string::npos);
}

}  // namespace
}  // namespace zen
