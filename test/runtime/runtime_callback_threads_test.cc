// Runtime::onCallbackThread() is per runtime: true on its own loop's thread (and only its
// own), false once that thread is joined, even on a later thread that gets the joined one's
// id (glibc reuses a joined thread's descriptor, so its std::thread::id, for the next thread),
// where destroying the runtime must not take it for its own callback (which aborts).
#include <atomic>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

std::unique_ptr<Runtime> singleRank() {
  auto rt = bindings::createInProcessRuntime(testConfig(), 0, bindings::InProcessJob::make(1));
  EXPECT_TRUE(rt.isOk()) << rt.status().toString();
  return rt.isOk() ? std::move(rt).value() : nullptr;
}

// Runs one allreduce on rt; the thread its callback ran on, and what onCallbackThread() said
// there for rt and for other.
struct CallbackSeen {
  std::thread::id thread;
  bool mine = false;
  bool other = true;
};
CallbackSeen runOne(Runtime& rt, const Runtime& other) {
  std::vector<float> x(2, 1.0f);
  CallbackSeen seen;
  auto h = rt.enqueue(TensorOp::allreduce("x", denseView(x, {2}), denseView(x, {2}))
                          .withCallback([&](const Status&, OpResult&) {
                            seen.thread = std::this_thread::get_id();
                            seen.mine = rt.onCallbackThread();
                            seen.other = other.onCallbackThread();
                          }));
  EXPECT_TRUE(h.isOk()) << h.status().toString();
  if (h.isOk()) {
    EXPECT_TRUE(waitFor(h.value()).isOk());
  }
  return seen;
}

TEST(RuntimeCallbackThreads, OnlyTheRuntimesOwnThreads) {
  std::unique_ptr<Runtime> a = singleRank();
  std::unique_ptr<Runtime> b = singleRank();
  ASSERT_TRUE(a && b);
  const CallbackSeen seen = runOne(*a, *b);
  EXPECT_TRUE(seen.mine);
  EXPECT_FALSE(seen.other);
  EXPECT_FALSE(a->onCallbackThread());  // the test's thread
}

TEST(RuntimeCallbackThreads, AJoinedLoopsIdIsNoLongerACallbackThread) {
  std::unique_ptr<Runtime> rt = singleRank();
  ASSERT_TRUE(rt);
  std::unique_ptr<Runtime> other = singleRank();
  const std::thread::id loop = runOne(*rt, *other).thread;
  ASSERT_TRUE(rt->shutdown().isOk());  // joins the loop
  // Threads until one has the joined loop's id; that one destroys the runtime.
  bool reused = false;
  bool onCallbackThread = true;
  for (int i = 0; i < 50 && !reused; ++i) {
    std::thread t([&] {
      if (std::this_thread::get_id() != loop) return;
      reused = true;
      onCallbackThread = rt->onCallbackThread();
      rt.reset();  // aborts if it takes this thread for its loop
    });
    t.join();
  }
  if (!reused) GTEST_SKIP() << "no new thread got the joined loop's id in 50 tries";
  EXPECT_FALSE(onCallbackThread);
  EXPECT_EQ(rt, nullptr);
}

}  // namespace
}  // namespace zen::testing
