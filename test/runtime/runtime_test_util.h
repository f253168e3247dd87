#pragma once

// Helpers of the runtime tests: a job of in-process ranks (one Runtime per rank, as threads
// of this process), deterministic integer-valued inputs whose sums are exact in fp32, and
// bounded waits everywhere, so that a hang fails the test instead of stalling it.

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bindings/runtime_factory.h"
#include "core/runtime.h"
#include "test/common/float_rows.h"

namespace zen::testing {

// Sanitizer builds run several times slower; waits and steps scale with this.
#ifdef ZEN_SANITIZED
inline constexpr double kSlowdown = 8.0;
#else
inline constexpr double kSlowdown = 1.0;
#endif
// Longest any single handle may take in a healthy test.
inline constexpr double kWaitSeconds = 30.0 * kSlowdown;

// A Config as the environment would give it, plus the test's ZEN_* overrides.
inline Config testConfig(std::map<std::string, std::string> env = {}) {
  env.emplace("ZEN_TIMEOUT", std::to_string(20 * kSlowdown));
  env.emplace("ZEN_THREADS", "1");
  auto c = Config::parse(env);
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? c.value() : Config{};
}

// A logger whose output the test reads (rank 0's stall warnings, say).
class CapturedLog {
 public:
  explicit CapturedLog(int rank) : sink_(std::make_shared<Sink>()) {
    logger_ = std::make_shared<spdlog::logger>("test." + std::to_string(rank), sink_);
    logger_->set_level(spdlog::level::info);
  }
  std::shared_ptr<spdlog::logger> logger() const { return logger_; }
  std::string text() const { return sink_->text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string text() {
      std::lock_guard<std::mutex> lock(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      text_.append(msg.payload.data(), msg.payload.size());
      text_ += '\n';
    }
    void flush_() override {}

   private:
    std::string text_;
  };

  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

// n in-process ranks, each a Runtime; logs[r] captures rank r's log.
class Job {
 public:
  explicit Job(int n, const Config& config = testConfig()) : job_(bindings::InProcessJob::make(n)) {
    for (int r = 0; r < n; ++r) {
      logs_.push_back(std::make_unique<CapturedLog>(r));
      auto rt = bindings::createInProcessRuntime(config, r, job_, logs_.back()->logger());
      EXPECT_TRUE(rt.isOk()) << rt.status().toString();
      if (rt.isOk()) ranks_.push_back(std::move(rt).value());
    }
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  Runtime& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  std::string log(int r) { return logs_[static_cast<size_t>(r)]->text(); }
  // Destroys every runtime (flushing timelines); they shut down together.
  void close() {
    for (auto& rt : ranks_) (void)rt->shutdown();
    ranks_.clear();
  }

  // fn(rank, runtime) on one thread per rank; every wait inside must be bounded.
  void onEachRank(const std::function<void(int, Runtime&)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&, r] { fn(r, rank(r)); });
    for (auto& t : threads) t.join();
  }

 private:
  bindings::InProcessJob job_;
  std::vector<std::unique_ptr<CapturedLog>> logs_;
  std::vector<std::unique_ptr<Runtime>> ranks_;
};

inline DenseView denseView(std::vector<float>& data, TensorShape shape) {
  DenseView v;
  v.data = data.data();
  v.dtype = DataType::kFloat32;
  v.shape = std::move(shape);
  return v;
}

// A rank's sparse gradient for (tensor, step): distinct random rows, small integer values.
using SparseInput = ::zen::testing::Float32Rows;

inline SparseInput makeSparse(uint64_t seed, int64_t numRows, int64_t rowSize, double density) {
  std::mt19937_64 rng(seed);
  SparseInput in;
  in.numRows = numRows;
  in.rowSize = rowSize;
  for (int64_t row = 0; row < numRows; ++row) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < density) in.indices.push_back(row);
  }
  std::shuffle(in.indices.begin(), in.indices.end(), rng);
  for (size_t k = 0; k < in.indices.size() * static_cast<size_t>(rowSize); ++k) {
    in.values.push_back(static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(rng)));
  }
  return in;
}

// The dense sum of every rank's input, [numRows x rowSize].
inline std::vector<float> denseSum(const std::vector<SparseInput>& inputs) {
  std::vector<float> sum(static_cast<size_t>(inputs.front().numRows * inputs.front().rowSize),
                         0.0f);
  for (const SparseInput& in : inputs) {
    for (size_t k = 0; k < in.indices.size(); ++k) {
      for (int64_t e = 0; e < in.rowSize; ++e) {
        sum[static_cast<size_t>(in.indices[k] * in.rowSize + e)] +=
            in.values[k * static_cast<size_t>(in.rowSize) + static_cast<size_t>(e)];
      }
    }
  }
  return sum;
}

// A sparse result densified, for comparison with denseSum.
inline std::vector<float> densify(const SparseTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numRows * t.rowSize), 0.0f);
  const auto* values = reinterpret_cast<const float*>(t.values.data());
  for (size_t k = 0; k < t.indices.size(); ++k) {
    for (int64_t e = 0; e < t.rowSize; ++e) {
      out[static_cast<size_t>(t.indices[k] * t.rowSize + e)] =
          values[k * static_cast<size_t>(t.rowSize) + static_cast<size_t>(e)];
    }
  }
  return out;
}

inline std::vector<float> scaled(std::vector<float> v, float factor) {
  for (float& x : v) x *= factor;
  return v;
}

// Waits for a handle with the test's bound; a timeout is a failure.
inline Status waitFor(const Handle& h, double seconds = kWaitSeconds) {
  Status s = h.wait(seconds);
  EXPECT_TRUE(h.poll()) << "handle still pending after " << seconds << " s";
  return s;
}

// A step with one rank joined: `joiner` joins, step(posters) runs on the other ranks, then
// they join too (which completes the joiner's join). Returns the joiner's join handle.
inline Handle stepWithJoinedRank(Job& job,
                                 int joiner,
                                 const std::function<void(const std::vector<int>&)>& step) {
  Handle join;
  job.onEachRank([&](int r, Runtime& rt) {
    if (r != joiner) return;
    auto h = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    join = h.value();
  });
  std::vector<int> posters;
  for (int r = 0; r < job.size(); ++r) {
    if (r != joiner) posters.push_back(r);
  }
  step(posters);
  job.onEachRank([&](int r, Runtime& rt) {
    if (r == joiner) return;
    auto h = rt.enqueue(TensorOp::join());
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    ASSERT_TRUE(waitFor(h.value()).isOk());
  });
  return join;
}

}  // namespace zen::testing
