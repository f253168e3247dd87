#pragma once

// The CUDA side of host staging (cuda/host_staging.h): what the DispatchExecutor needs to run a
// GPU bucket in the CPU executor. Copies run on a stream of this class's own (never the
// executor's, so a collective stuck there does not hold them up), every wait bounded by the
// timeout: straight between the device and hostMemory()'s page-locked region (the host twins:
// grown to the largest bucket and reused), other host memory (results the CPU executor put in
// vectors) through a page-locked bounce buffer of at most kBounceBytes, round by round
// (planBounce): cudaMemcpyAsync with pageable memory may block the host until the stream
// drains. Outgrown page-locked buffers are kept until destruction: freeing one waits for the
// whole device, a collective stuck there included. After a copy failed or timed out the
// buffers may still be in use: every later call returns kAborted with that first error. Loop thread
// only. CUDA types stay in cuda_staging.cc.
#include <functional>
#include <memory>
#include <vector>

#include "cuda/host_staging.h"

namespace spdlog {
class logger;
}

namespace zen::cuda {

class CudaStaging final : public DeviceStaging {
 public:
  static constexpr size_t kBounceBytes = size_t{64} << 20;

  // useDevice(index): the executor's rule for this rank's one device (makes it current, or
  // refuses another); the stream is created on it at the first prepare, which also says, once,
  // at info on `logger` (optional), that such buckets run at host speed.
  CudaStaging(double timeoutSeconds,
              std::function<Status(int)> useDevice,
              std::shared_ptr<spdlog::logger> logger = nullptr);
  // Waits (bounded) for the stream, then frees it and the buffer.
  ~CudaStaging() override;
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  Status prepare(int device, const std::vector<TensorEntry*>& entries) override;
  Result<std::byte*> hostMemory(size_t bytes) override;
  Status toHost(const std::vector<StagedCopy>& copies) override;
  Status toDevice(const std::vector<StagedCopy>& copies) override;
  Status allocate(size_t bytes, std::shared_ptr<void>* out) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace zen::cuda
