#pragma once

// Helpers of the bindings tests: a job of in-process ranks, one Api each (what the C API
// holds once per process), inputs whose sums are exact in fp32, bounded waits.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bindings/api.h"
#include "bindings/runtime_factory.h"
#include "test/common/float_rows.h"

namespace zen::testing {

inline constexpr double kWait = 30.0;  // the longest any handle may take in a healthy test

inline Config bindingsConfig(std::map<std::string, std::string> env = {}) {
  env.emplace("ZEN_TIMEOUT", "20");
  env.emplace("ZEN_THREADS", "1");
  auto c = Config::parse(env);
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? c.value() : Config{};
}

// n ranks as threads of this process, each an initialized Api over in-process transports.
class ApiJob {
 public:
  explicit ApiJob(int n, const Config& config = bindingsConfig())
      : job_(bindings::InProcessJob::make(n)) {
    for (int r = 0; r < n; ++r) {
      apis_.push_back(std::make_unique<bindings::Api>());
      const Status s = apis_.back()->init(
          config, [&, r](const Config& c) { return bindings::createInProcessRuntime(c, r, job_); },
          bindings::backendName(bindings::Backend::kInProcess));
      EXPECT_TRUE(s.isOk()) << s.toString();
    }
  }
  ~ApiJob() { shutdown(); }

  int size() const { return static_cast<int>(apis_.size()); }
  bindings::Api& rank(int r) { return *apis_[static_cast<size_t>(r)]; }
  void shutdown() {
    for (auto& a : apis_) (void)a->shutdown();
  }
  // fn(rank, api) on one thread per rank; every wait inside must be bounded.
  void onEachRank(const std::function<void(int, bindings::Api&)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&, r] { fn(r, rank(r)); });
    for (auto& t : threads) t.join();
  }

 private:
  bindings::InProcessJob job_;
  std::vector<std::unique_ptr<bindings::Api>> apis_;
};

// Waits with the test's bound: the operation's status, or a failure when it did not end.
inline Status waitDone(const bindings::Api& api, int64_t id, double seconds = kWait) {
  bool finished = false;
  Status s = api.wait(id, seconds, &finished);
  EXPECT_TRUE(finished) << "operation " << id << " still pending after " << seconds << " s";
  return s;
}

// Runs fn on a thread of its own and fails when it has not ended within `seconds`. A hang (a
// deadlock under test) cannot be unwound, so the process exits at once with a message rather
// than leave CTest waiting for its timeout.
inline void runBounded(double seconds, const char* what, std::function<void()> fn) {
  std::packaged_task<void()> task(std::move(fn));
  std::future<void> done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not end within %.0f s (deadlock)\n", what, seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  t.join();
  done.get();
}

// A rank's row-sparse input: random rows (repeats included), small integer values.
using Rows = ::zen::testing::Float32Rows;

inline Rows makeRows(uint64_t seed, int64_t numRows, int64_t rowSize, int64_t nnz) {
  std::mt19937_64 rng(seed);
  Rows in;
  in.numRows = numRows;
  in.rowSize = rowSize;
  for (int64_t k = 0; k < nnz; ++k) {
    in.indices.push_back(std::uniform_int_distribution<int64_t>(0, numRows - 1)(rng));
    for (int64_t e = 0; e < rowSize; ++e) {
      in.values.push_back(static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(rng)));
    }
  }
  return in;
}

inline std::vector<float> denseSum(const std::vector<Rows>& inputs) {
  const Rows& first = inputs.front();
  std::vector<float> sum(static_cast<size_t>(first.numRows * first.rowSize), 0.0f);
  for (const Rows& in : inputs) {
    for (size_t k = 0; k < in.indices.size(); ++k) {
      for (int64_t e = 0; e < in.rowSize; ++e) {
        sum[static_cast<size_t>(in.indices[k] * in.rowSize + e)] +=
            in.values[k * static_cast<size_t>(in.rowSize) + static_cast<size_t>(e)];
      }
    }
  }
  return sum;
}

inline std::vector<float> densify(
    const int64_t* indices, const float* values, int64_t nnz, int64_t numRows, int64_t rowSize) {
  std::vector<float> out(static_cast<size_t>(numRows * rowSize), 0.0f);
  for (int64_t k = 0; k < nnz; ++k) {
    for (int64_t e = 0; e < rowSize; ++e) {
      out[static_cast<size_t>(indices[k] * rowSize + e)] = values[k * rowSize + e];
    }
  }
  return out;
}

}  // namespace zen::testing
