// HOROVOD_* variables in a zen job (core/horovod_env.h): the aliases through Config::parse,
// precedence, errors naming the HOROVOD_* variable, and the one warning of ignored names.
#include "core/horovod_env.h"

#include <gtest/gtest.h>

#include "core/config.h"

namespace zen {
namespace {

TEST(HorovodEnv, EveryAliasSetsItsZenKnob) {
  const auto c = Config::parse({{"HOROVOD_FUSION_THRESHOLD", "33554432"},
                                {"HOROVOD_CYCLE_TIME", "3.5"},
                                {"HOROVOD_CACHE_CAPACITY", "2048"},
                                {"HOROVOD_TIMELINE", "/tmp/t.json"},
                                {"HOROVOD_TIMELINE_MARK_CYCLES", "1"},
                                {"HOROVOD_AUTOTUNE", "1"},
                                {"HOROVOD_AUTOTUNE_LOG", "/tmp/tune.csv"},
                                {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5"},
                                {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20"},
                                {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "50"},
                                {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.9"},
                                {"HOROVOD_STALL_CHECK_TIME_SECONDS", "120"},
                                {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "240"},
                                {"HOROVOD_LOG_HIDE_TIME", "1"},
                                {"HOROVOD_MPI_THREADS_DISABLE", "1"},
                                {"HOROVOD_GLOO_IFACE", "eth1"},
                                {"HOROVOD_GLOO_TIMEOUT_SECONDS", "60"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  const Config& v = c.value();
  // Same units as Zen's: bytes, milliseconds, entries, seconds.
  EXPECT_EQ(v.fusionThresholdBytes, 33554432);
  EXPECT_TRUE(v.fusionThresholdSet);  // explicitly set: the autotuner leaves it alone
  EXPECT_DOUBLE_EQ(v.cycleTimeMs, 3.5);
  EXPECT_TRUE(v.cycleTimeSet);
  EXPECT_EQ(v.cacheCapacity, 2048);
  EXPECT_EQ(v.timeline, "/tmp/t.json");
  EXPECT_TRUE(v.timelineMarkCycles);
  EXPECT_TRUE(v.autotune);
  EXPECT_EQ(v.autotuneLog, "/tmp/tune.csv");
  EXPECT_EQ(v.autotuneWarmupSamples, 5);
  EXPECT_EQ(v.autotuneStepsPerSample, 20);
  EXPECT_EQ(v.autotuneMaxSamples, 50);
  EXPECT_DOUBLE_EQ(v.autotuneNoise, 0.9);
  EXPECT_DOUBLE_EQ(v.stallCheckSeconds, 120.0);
  EXPECT_DOUBLE_EQ(v.stallShutdownSeconds, 240.0);
  EXPECT_TRUE(v.logHideTime);
  EXPECT_TRUE(v.mpiThreadsDisable);
  EXPECT_EQ(v.ifaces, std::vector<std::string>{"eth1"});
  EXPECT_DOUBLE_EQ(v.timeoutSeconds, 60.0);
  EXPECT_TRUE(v.warnings.empty()) << v.warnings.front();
}

// Horovod's level names, in any case, map onto spdlog's.
TEST(HorovodEnv, LogLevelIsConverted) {
  for (const auto& [horovod, zen] : std::vector<std::pair<std::string, std::string>>{
           {"WARNING", "warn"}, {"fatal", "critical"}, {"INFO", "info"}, {"Trace", "trace"}}) {
    const auto c = Config::parse({{"HOROVOD_LOG_LEVEL", horovod}});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c.value().logLevel, zen) << horovod;
  }
}

TEST(HorovodEnv, StallCheckDisableTurnsTheCheckOffWhateverTheTime) {
  auto c = Config::parse({{"HOROVOD_STALL_CHECK_DISABLE", "1"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(c.value().stallCheckSeconds, 0.0);
  c = Config::parse(
      {{"HOROVOD_STALL_CHECK_DISABLE", "0"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "90"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(c.value().stallCheckSeconds, 90.0);
  EXPECT_TRUE(c.value().warnings.empty());
  c = Config::parse(
      {{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HOROVOD_STALL_CHECK_TIME_SECONDS", "90"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(c.value().stallCheckSeconds, 0.0);
  ASSERT_EQ(c.value().warnings.size(), 1u);
  EXPECT_EQ(c.value().warnings[0],
            "HOROVOD_STALL_CHECK_TIME_SECONDS=90 is overridden by HOROVOD_STALL_CHECK_DISABLE=1");
}

// ZEN_* wins (zenrun's flags set ZEN_*); a different value is said, the same one is not.
TEST(HorovodEnv, ZenVariableWinsOverItsAlias) {
  auto c = Config::parse({{"ZEN_CYCLE_TIME", "2"}, {"HOROVOD_CYCLE_TIME", "7"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_DOUBLE_EQ(c.value().cycleTimeMs, 2.0);
  ASSERT_EQ(c.value().warnings.size(), 1u);
  EXPECT_EQ(c.value().warnings[0], "HOROVOD_CYCLE_TIME=7 is overridden by ZEN_CYCLE_TIME=2");
  c = Config::parse({{"ZEN_FUSION_THRESHOLD", "1024"}, {"HOROVOD_FUSION_THRESHOLD", "1024"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_TRUE(c.value().warnings.empty());
  c = Config::parse({{"ZEN_LOG_LEVEL", "info"}, {"HOROVOD_LOG_LEVEL", "WARNING"}});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c.value().logLevel, "info");
  EXPECT_EQ(c.value().warnings.at(0),
            "HOROVOD_LOG_LEVEL=WARNING is overridden by ZEN_LOG_LEVEL=info");
}

// Bad alias values: config_test.cc (ConfigRejects/HorovodAliases), naming the HOROVOD_* variable.

TEST(HorovodEnv, OneWarningNamesEveryIgnoredVariable) {
  const std::map<std::string, std::string> env = {
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
      {"HOROVOD_NUM_NCCL_STREAMS", "2"},
      {"HOROVOD_SOMETHING_NEW", "x"},
      {"HOROVOD_CYCLE_TIME", "2"},         // an alias: used, not listed
      {"HOROVOD_GPU_OPERATIONS", "NCCL"},  // pip install's
      {"HOROVOD_WITH_PYTORCH", "1"},       // pip install's
      {"HOROVOD_HOSTNAME", "node1"},       // a Horovod launcher's placement
      {"HOROVOD_RANK", "0"},
      {"PATH", "/bin"}};
  EXPECT_EQ(horovodIgnoredWarning(env),
            "Horovod variables zen ignores: HOROVOD_HIERARCHICAL_ALLREDUCE (zen has no "
            "hierarchical allreduce), HOROVOD_NUM_NCCL_STREAMS (zen's GPU path has no such "
            "setting), HOROVOD_SOMETHING_NEW (no zen counterpart)");
  EXPECT_EQ(horovodIgnoredWarning({{"HOROVOD_CYCLE_TIME", "2"}, {"PATH", "/bin"}}), "");
  // Config::parse carries it, once; never an error.
  const auto c = Config::parse(env);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_EQ(c.value().warnings.size(), 1u);
  EXPECT_EQ(c.value().warnings[0], horovodIgnoredWarning(env));
}

// horovodrun's Gloo launcher placed this process in a job zen cannot join: refused rather
// than run as a job of one. zenrun's or MPI's placement, or a job of one, is fine.
TEST(HorovodEnv, AHorovodLaunchedRankIsRefused) {
  const auto c = Config::parse({{"HOROVOD_RANK", "1"}, {"HOROVOD_SIZE", "4"}});
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("HOROVOD_RANK=1 HOROVOD_SIZE=4"), std::string::npos);
  EXPECT_NE(c.status().message().find("zenrun"), std::string::npos);
  EXPECT_TRUE(
      Config::parse(
          {{"HOROVOD_RANK", "1"}, {"HOROVOD_SIZE", "4"}, {"ZEN_RANK", "0"}, {"ZEN_SIZE", "2"}})
          .isOk());
  EXPECT_TRUE(Config::parse({{"HOROVOD_RANK", "1"},
                             {"HOROVOD_SIZE", "4"},
                             {"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "4"}})
                  .isOk());
  EXPECT_TRUE(Config::parse({{"HOROVOD_RANK", "0"}, {"HOROVOD_SIZE", "1"}}).isOk());
}

}  // namespace
}  // namespace zen
