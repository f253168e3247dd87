#include "core/cpu_share.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace zen {
namespace {

TEST(CpuShare, AnUnboundRankGetsTheHostsCoresSharedAmongItsLocalRanks) {
  EXPECT_EQ(cpuShare(16, 16, 1), 16);
  EXPECT_EQ(cpuShare(16, 16, 4), 4);
  EXPECT_EQ(cpuShare(16, 16, 3), 5);  // rounded down: never more threads than cores
  EXPECT_EQ(cpuShare(2, 2, 4), 1);    // more ranks than cores: one thread each, not zero
}

TEST(CpuShare, ABoundRankSharesItsCpusWithTheRanksBoundBesideIt) {
  EXPECT_EQ(cpuShare(1, 16, 4), 1);   // mpirun --bind-to core
  EXPECT_EQ(cpuShare(2, 16, 4), 2);   // two cores each: nobody else on them
  EXPECT_EQ(cpuShare(8, 16, 4), 4);   // two sockets of 8, two ranks on each
  EXPECT_EQ(cpuShare(8, 16, 3), 4);   // 3 ranks on 2 sockets: up to 2 on one
  EXPECT_EQ(cpuShare(8, 16, 1), 8);   // alone, on one socket
  EXPECT_EQ(cpuShare(8, 16, 64), 1);  // more ranks than cores
}

TEST(CpuShare, UnknownOrOddCountsStillGiveAtLeastOneThread) {
  EXPECT_EQ(cpuShare(0, 8, 2), 4);   // affinity unreadable: the host's CPUs
  EXPECT_EQ(cpuShare(32, 8, 2), 4);  // a mask wider than the online CPUs
  EXPECT_EQ(cpuShare(4, 0, 1), 1);   // hardware_concurrency unknown
  EXPECT_EQ(cpuShare(8, 8, 0), 8);   // no local size: one rank
}

// This process: its own affinity mask narrowed in a thread of its own, so the share follows it.
TEST(CpuShare, ThisProcessFollowsItsAffinityMask) {
  const int host = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  EXPECT_EQ(cpuShareOfThisProcess(1), std::min(CPU_COUNT(&mask), std::max(host, 1)));
  if (host < 2) GTEST_SKIP() << "one CPU: a narrower mask cannot be tested";
  int narrowed = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    narrowed = cpuShareOfThisProcess(4);
  }).join();
  EXPECT_EQ(narrowed, 1);
}

}  // namespace
}  // namespace zen
