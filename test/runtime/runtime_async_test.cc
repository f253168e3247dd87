// Buckets that an executor ends later, on a thread of its own (Executor::submit, what the CUDA
// executor's finalizer does): the loop keeps cycling meanwhile, the names stay in flight, the
// handles complete with the executor's status, shutdown waits for buckets in flight, a
// callback on that thread may ask for shutdown, and a failure reported there stops the job.
// Runs on the CPU: the "device" is a CpuExecutor whose completions a gate holds back.
#include <atomic>
#include <condition_variable>
#include <deque>

#include "controller/channel_negotiator.h"
#include "core/logging.h"
#include "ops/cpu_executor.h"
#include "ops/transport_control_channel.h"
#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

// Runs each bucket on the CPU at submit, but calls done from its own thread only once the
// gate is open (and, for a bucket named `failing`, with a device error instead).
class GatedExecutor final : public Executor {
 public:
  explicit GatedExecutor(std::unique_ptr<ops::CpuExecutor> inner, std::string failing = "")
      : inner_(std::move(inner)), failing_(std::move(failing)), thread_([this] { run(); }) {}
  ~GatedExecutor() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      open_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override {
    return inner_->execute(response, entries, report);
  }
  void submit(const Response& response,
              const std::vector<TensorEntry*>& entries,
              const BucketDone& done) override {
    BucketReport report;
    Status status = inner_->execute(response, entries, &report);
    if (response.tensorNames.front() == failing_) {
      status = ZEN_ERROR(StatusCode::kAborted, "device lost while running '{}'", failing_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(Item{status, std::move(report), done});
    ++submitted_;
    cv_.notify_all();
  }
  void drain() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_.empty() && !running_; });
  }
  Status accept(TensorEntry&) override { return Status::ok(); }

  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits (bounded) until n buckets have been submitted.
  bool waitSubmitted(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(kWaitSeconds),
                        [&] { return submitted_ >= n; });
  }
  std::thread::id threadId() const { return thread_.get_id(); }

 private:
  struct Item {
    Status status;
    BucketReport report;
    BucketDone done;
  };
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || (open_ && !pending_.empty()); });
      if (pending_.empty()) return;
      Item item = std::move(pending_.front());
      pending_.pop_front();
      running_ = true;
      lock.unlock();
      item.done(item.status, std::move(item.report));
      lock.lock();
      running_ = false;
      cv_.notify_all();
    }
  }

  std::unique_ptr<ops::CpuExecutor> inner_;
  std::string failing_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> pending_;
  int submitted_ = 0;
  bool open_ = false;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// A runtime of one rank over the executor that make(data transport) builds.
std::unique_ptr<Runtime> oneRank(
    const std::function<std::unique_ptr<Executor>(std::unique_ptr<ops::Transport>)>& make) {
  const Config config = testConfig();
  auto job = bindings::InProcessJob::make(1);
  ops::TransportOptions o = ops::TransportOptions::fromConfig(config);
  auto control = ops::createInProcessTransport(job.control, o);
  auto data = ops::createInProcessTransport(job.data, o);
  EXPECT_TRUE(control.isOk() && data.isOk());
  auto rt = Runtime::create(
      RuntimeOptions::fromConfig(config, 0, 1),
      std::make_unique<ops::TransportControlChannel>(std::move(control).value()),
      std::make_unique<controller::ChannelNegotiator>(
          controller::NegotiatorOptions::fromConfig(config, 0, 1), makeLogger(0, "off")),
      make(std::move(data).value()));
  EXPECT_TRUE(rt.isOk()) << rt.status().toString();
  return rt.isOk() ? std::move(rt).value() : nullptr;
}

struct GatedRank {
  GatedExecutor* executor = nullptr;
  std::unique_ptr<Runtime> runtime;
};

GatedRank makeGatedRank(std::string failing = "") {
  GatedRank rank;
  rank.runtime = oneRank([&](std::unique_ptr<ops::Transport> data) {
    auto e = std::make_unique<GatedExecutor>(
        std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{}),
        std::move(failing));
    rank.executor = e.get();
    return e;
  });
  return rank;
}

TEST(RuntimeAsync, TheLoopKeepsGoingWhileBucketsAreInFlight) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  std::vector<float> a(4, 2.0f), b(3, 5.0f);
  std::thread::id completedOn;
  auto ha = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4}))
                           .withCallback([&](const Status&, OpResult&) {
                             completedOn = std::this_thread::get_id();
                           }));
  ASSERT_TRUE(ha.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  // "a" is in flight: its name is taken, and another tensor still reaches the executor.
  auto again = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4})));
  EXPECT_FALSE(again.isOk());
  auto hb = rt.enqueue(TensorOp::allreduce("b", denseView(b, {3}), denseView(b, {3})));
  ASSERT_TRUE(hb.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(2));
  EXPECT_FALSE(ha.value().poll());
  EXPECT_FALSE(hb.value().poll());
  g.executor->open();
  ASSERT_TRUE(waitFor(ha.value()).isOk());
  ASSERT_TRUE(waitFor(hb.value()).isOk());
  EXPECT_EQ(completedOn, g.executor->threadId());
  for (float v : a) EXPECT_EQ(v, 2.0f);
  for (float v : b) EXPECT_EQ(v, 5.0f);
  const RuntimeStats stats = rt.stats();
  EXPECT_EQ(stats.bucketsExecuted, 2u);
  EXPECT_EQ(stats.completed, 2u);
  EXPECT_EQ(stats.tensors.at("a").lastBucket, 0);
  EXPECT_EQ(stats.tensors.at("b").lastBucket, 1);
}

TEST(RuntimeAsync, ShutdownWaitsForBucketsInFlight) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  std::vector<float> a(4, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("a", denseView(a, {4}), denseView(a, {4})));
  ASSERT_TRUE(h.isOk());
  ASSERT_TRUE(g.executor->waitSubmitted(1));
  std::atomic<bool> returned{false};
  std::thread stopper([&] {
    (void)rt.shutdown();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The device still uses the tensor: neither the handle nor shutdown may end yet.
  EXPECT_FALSE(returned.load());
  EXPECT_FALSE(h.value().poll());
  g.executor->open();
  stopper.join();
  EXPECT_TRUE(waitFor(h.value()).isOk());  // its bucket ended well before the stop
  EXPECT_FALSE(rt.enqueue(TensorOp::allreduce("b", denseView(a, {4}), denseView(a, {4}))).isOk());
}

TEST(RuntimeAsync, ShutdownFromACallbackOnTheExecutorsThreadDoesNotDeadlock) {
  GatedRank g = makeGatedRank();
  Runtime& rt = *g.runtime;
  g.executor->open();
  std::vector<float> a(2, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("a", denseView(a, {2}), denseView(a, {2}))
                          .withCallback([&](const Status&, OpResult&) { (void)rt.shutdown(); }));
  ASSERT_TRUE(h.isOk());
  EXPECT_TRUE(waitFor(h.value()).isOk());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (rt.running() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(rt.running());
}

TEST(RuntimeAsync, AFailureReportedLaterStopsTheRankWithItsCause) {
  GatedRank g = makeGatedRank("boom");
  Runtime& rt = *g.runtime;
  g.executor->open();
  std::vector<float> a(2, 1.0f);
  auto h = rt.enqueue(TensorOp::allreduce("boom", denseView(a, {2}), denseView(a, {2})));
  ASSERT_TRUE(h.isOk());
  const Status first = waitFor(h.value());
  EXPECT_EQ(first.code(), StatusCode::kAborted);
  EXPECT_NE(first.message().find("device lost while running 'boom'"), std::string::npos);
  auto later = rt.enqueue(TensorOp::allreduce("later", denseView(a, {2}), denseView(a, {2})));
  const Status s = later.isOk() ? waitFor(later.value()) : later.status();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.toString();
  EXPECT_NE(s.message().find("rank 0 failed: Aborted: device lost"), std::string::npos)
      << s.message();
}

TEST(RuntimeAsync, HostOnlyExecutorsRefuseDeviceTensorsAtEnqueue) {
  std::unique_ptr<Runtime> rt = oneRank([](std::unique_ptr<ops::Transport> data) {
    return std::make_unique<ops::CpuExecutor>(std::move(data), ops::CpuExecutorOptions{});
  });
  ASSERT_TRUE(rt);
  std::vector<float> a(2, 1.0f);
  DenseView v = denseView(a, {2});
  v.device = Device::cuda(0);
  auto h = rt->enqueue(TensorOp::allreduce("gpu", v, v));
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("built without CUDA"), std::string::npos)
      << h.status().message();
  // A host tensor with a ready signal, or views on two devices, are malformed anyway.
  DenseView host = denseView(a, {2});
  int fake = 0;
  auto withEvent = rt->enqueue(TensorOp::allreduce("ev", host, host).withReady({&fake, nullptr}));
  EXPECT_FALSE(withEvent.isOk());
  auto mixed = rt->enqueue(TensorOp::allreduce("mixed", host, v));
  EXPECT_FALSE(mixed.isOk());
}

}  // namespace
}  // namespace zen::testing
