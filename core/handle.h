#pragma once

// The completion side of one enqueued operation: the framework thread holds a Handle (wait
// with a timeout, poll) and may register a callback; the background thread completes it.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace zen {

// Outputs the runtime allocates because their size is known only after the collective.
struct OpResult {
  SparseTensor sparse;  // sparse allreduce without a dense output: coalesced rows
  // ... of device tensors: the rows stay on sparseDevice (cuda/cuda_executor.h):
  // sparseDeviceNnz row indices (int64, ascending) and their rows, in memory the executor
  // allocated and these pointers own (slices of one allocation per bucket, freed with the
  // last of them); `sparse` then carries only numRows, rowSize and dtype. Null for host
  // tensors and for nnz 0.
  std::shared_ptr<void> sparseIndicesOnDevice;
  std::shared_ptr<void> sparseValuesOnDevice;
  int64_t sparseDeviceNnz = 0;
  Device sparseDevice;  // host (the default) unless the result is on a device
  // allgather: every rank's rows, rank order; alltoall: the rows every rank sent here.
  std::vector<std::byte> gathered;
  TensorShape gatheredShape;            // allgather and alltoall: [total rows, ...]
  std::vector<int64_t> receivedSplits;  // alltoall: rows received from each rank
  // allgather of device tensors: the rows stay on gatheredDevice, in memory the executor
  // allocated (cuda/cuda_executor.h: cudaMalloc) and this pointer owns (freed with the
  // handle's state); `gathered` is then empty. Null for host tensors and for 0 bytes.
  std::shared_ptr<void> gatheredOnDevice;
  size_t gatheredDeviceBytes = 0;
  Device gatheredDevice;        // host (the default) unless gatheredOnDevice was set
  int32_t lastJoinedRank = -1;  // join: the rank whose join completed the set
  int32_t processSet = -1;      // add_process_set: the new set's id
};

// Runs on the background thread when the operation ends, before waiters wake up; the result
// may be moved out. It must be quick (every rank's next cycle waits for this thread) and must
// not wait on handles of the same runtime.
using Callback = std::function<void(const Status& status, OpResult& result)>;

class HandleState {
 public:
  explicit HandleState(Callback callback) : callback_(std::move(callback)) {}

  // Background thread: the result is written before complete().
  OpResult& result() { return result_; }
  void complete(Status status);

  bool done() const;
  Status wait(double timeoutSeconds) const;
  Status status() const;
  const OpResult& finishedResult() const { return result_; }  // only once done()

 private:
  Callback callback_;
  OpResult result_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

// A copyable reference to one operation's completion.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<HandleState> state) : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  // Whether the operation has ended (either way).
  bool poll() const { return state_ && state_->done(); }
  // The operation's status once it ends within timeoutSeconds; kTimeout while it is still
  // pending (the handle stays usable: wait again).
  Status wait(double timeoutSeconds) const;
  // After the end: its outputs (sparse result, gathered tensor, join's rank).
  const OpResult& result() const { return state_->finishedResult(); }

 private:
  std::shared_ptr<HandleState> state_;
};

}  // namespace zen
