#pragma once

// The executor of a CUDA build (bindings/runtime_factory.cc): host buckets to the CPU
// executor, GPU buckets to the CUDA executor, decided from the plan (runsOnDevice: the same
// on every rank) and, at enqueue, from where the entry's tensors live. GPU buckets the CUDA
// executor has no collective for (Adasum, process sets other than the global one:
// runsStaged) run in the CPU executor over host copies (cuda/host_staging.h). Plain C++:
// test/cuda_host checks the dispatch with fake executors, and the staging with host memory
// posing as a device.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/executor.h"
#include "cuda/device_bucket.h"
#include "cuda/host_staging.h"

namespace zen::cuda {

class DispatchExecutor final : public Executor {
 public:
  // The device executor is destroyed first (it may borrow the host one's transport).
  // `staging` moves staged buckets' tensors (usually the device executor itself); it must live
  // as long as `device`.
  DispatchExecutor(int rank,
                   std::unique_ptr<Executor> host,
                   std::unique_ptr<Executor> device,
                   DeviceStaging* staging)
      : rank_(rank), host_(std::move(host)), device_(std::move(device)), staging_(staging) {}

  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override {
    const Route route = pick(response);
    if (route == Route::kStaged) return runStaged(response, entries, *host_, *staging_, report);
    return executor(route).execute(response, entries, report);
  }
  void submit(const Response& response,
              const std::vector<TensorEntry*>& entries,
              const BucketDone& done) override {
    const Route route = pick(response);
    if (route == Route::kStaged) {  // synchronous: execute(), then done
      Executor::submit(response, entries, done);
      return;
    }
    executor(route).submit(response, entries, done);
  }
  void drain() override {
    device_->drain();
    host_->drain();
  }
  Status accept(TensorEntry& entry) override {
    return entryDevice(entry).kind == Device::Kind::kCpu ? host_->accept(entry)
                                                         : device_->accept(entry);
  }
  // Process sets run in the host executor (GPU tensors staged); this rank's number in the
  // set picks its device in the set's plans.
  Status addProcessSet(int32_t id, const std::vector<int32_t>& members) override {
    ZEN_RETURN_IF_ERROR(host_->addProcessSet(id, members));
    const auto at = std::find(members.begin(), members.end(), rank_);
    setRanks_[id] = at == members.end() ? -1 : static_cast<int>(at - members.begin());
    return Status::ok();
  }
  void removeProcessSet(int32_t id) override {
    setRanks_.erase(id);
    host_->removeProcessSet(id);
  }

 private:
  enum class Route { kHost, kDevice, kStaged };

  // From the plan only (the same on every rank): this rank's device in it (its number within
  // the response's set), then whether the device executor runs such a bucket.
  Route pick(const Response& response) const {
    int rank = rank_;
    if (response.processSet != kGlobalProcessSet) {
      const auto set = setRanks_.find(response.processSet);
      rank = set == setRanks_.end() ? -1 : set->second;  // unknown: the host executor says so
    }
    if (!runsOnDevice(response, rank)) return Route::kHost;
    return runsStaged(response) ? Route::kStaged : Route::kDevice;
  }
  Executor& executor(Route route) { return route == Route::kDevice ? *device_ : *host_; }

  const int rank_;
  std::unique_ptr<Executor> host_;
  std::unique_ptr<Executor> device_;
  DeviceStaging* staging_;
  std::map<int32_t, int> setRanks_;  // set id -> this rank's number in it
};

}  // namespace zen::cuda
