#pragma once

// The executor of a CUDA build (bindings/runtime_factory.cc): host buckets to the CPU
// executor, GPU buckets to the CUDA executor, decided from the plan (runsOnDevice: the same
// on every rank) and, at enqueue, from where the entry's tensors live. Plain C++: test/cuda_host
// checks the dispatch with fake executors.
#include <memory>
#include <utility>

#include "core/executor.h"
#include "cuda/device_bucket.h"

namespace zen::cuda {

class DispatchExecutor final : public Executor {
 public:
  // The device executor is destroyed first (it may borrow the host one's transport).
  DispatchExecutor(int rank, std::unique_ptr<Executor> host, std::unique_ptr<Executor> device)
      : rank_(rank), host_(std::move(host)), device_(std::move(device)) {}

  Status execute(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 BucketReport* report) override {
    return pick(response).execute(response, entries, report);
  }
  void submit(const Response& response,
              const std::vector<TensorEntry*>& entries,
              const BucketDone& done) override {
    pick(response).submit(response, entries, done);
  }
  void drain() override {
    device_->drain();
    host_->drain();
  }
  Status accept(TensorEntry& entry) override {
    return entryDevice(entry).kind == Device::Kind::kCpu ? host_->accept(entry)
                                                         : device_->accept(entry);
  }
  // Process sets run on host tensors only (the device executor refuses theirs at accept).
  Status addProcessSet(int32_t id, const std::vector<int32_t>& members) override {
    return host_->addProcessSet(id, members);
  }
  void removeProcessSet(int32_t id) override { host_->removeProcessSet(id); }

 private:
  Executor& pick(const Response& response) {
    if (response.processSet != kGlobalProcessSet) return *host_;
    return runsOnDevice(response, rank_) ? *device_ : *host_;
  }

  const int rank_;
  std::unique_ptr<Executor> host_;
  std::unique_ptr<Executor> device_;
};

}  // namespace zen::cuda
