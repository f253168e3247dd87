#pragma once

// An asynchronous executor on the CPU, for the runtime and bindings tests: what the CUDA
// executor's finalizer does (Executor::submit ends each bucket later, on a thread of its own),
// with a gate that holds the completions back; and a runtime of an in-process job over any
// executor.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bindings/runtime_factory.h"
#include "controller/channel_negotiator.h"
#include "core/logging.h"
#include "core/runtime.h"
#include "ops/cpu_executor.h"
#include "ops/transport_control_channel.h"

namespace zen::testing {

// Runs each bucket on the CPU at submit, but calls done from its own thread only once the
// gate is open (and, for a bucket named `failing`, with a device error instead).
class GatedExecutor final : public Executor {
 public:
  // waitSubmitted() gives up after waitSeconds.
  explicit GatedExecutor(std::unique_ptr<ops::CpuExecutor> inner,
                         std::string failing = "",
                         double waitSeconds = 30.0)
      : inner_(std::move(inner)),
        failing_(std::move(failing)),
        waitSeconds_(waitSeconds),
        thread_([this] { run(); }) {}
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
    return cv_.wait_for(lock, std::chrono::duration<double>(waitSeconds_),
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
  double waitSeconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> pending_;
  int submitted_ = 0;
  bool open_ = false;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

using MakeExecutor = std::function<std::unique_ptr<Executor>(std::unique_ptr<ops::Transport>)>;

// Rank `rank` of `size` over the given transports and the executor that make(data) builds.
inline std::unique_ptr<Runtime> runtimeOver(std::unique_ptr<ops::Transport> control,
                                            std::unique_ptr<ops::Transport> data,
                                            int rank,
                                            int size,
                                            const MakeExecutor& make,
                                            const Config& config) {
  auto rt = Runtime::create(
      RuntimeOptions::fromConfig(config, rank, size),
      std::make_unique<ops::TransportControlChannel>(std::move(control)),
      std::make_unique<controller::ChannelNegotiator>(
          controller::NegotiatorOptions::fromConfig(config, rank, size), makeLogger(rank, "off")),
      make(std::move(data)));
  EXPECT_TRUE(rt.isOk()) << rt.status().toString();
  return rt.isOk() ? std::move(rt).value() : nullptr;
}

// Rank `rank` of `job` over the executor that make(data transport) builds.
inline std::unique_ptr<Runtime> rankOf(const bindings::InProcessJob& job,
                                       int rank,
                                       const MakeExecutor& make,
                                       const Config& config) {
  ops::TransportOptions o = ops::TransportOptions::fromConfig(config);
  o.rank = rank;
  o.size = job.size;
  auto control = ops::createInProcessTransport(job.control, o);
  auto data = ops::createInProcessTransport(job.data, o);
  EXPECT_TRUE(control.isOk() && data.isOk());
  if (!control.isOk() || !data.isOk()) return nullptr;
  return runtimeOver(std::move(control).value(), std::move(data).value(), rank, job.size, make,
                     config);
}

}  // namespace zen::testing
