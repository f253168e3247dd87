#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace zen {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceAcrossManyRounds) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int round = 0; round < 200; ++round) {
    const int tasks = round % 17;
    std::vector<std::atomic<int>> hits(tasks);
    pool.parallelFor(tasks, [&](int64_t t) { hits[t].fetch_add(1); });
    for (int t = 0; t < tasks; ++t) ASSERT_EQ(hits[t].load(), 1) << "round " << round;
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int64_t sum = 0;
  pool.parallelFor(100, [&](int64_t t) { sum += t; });
  EXPECT_EQ(sum, 4950);
}

}  // namespace
}  // namespace zen
