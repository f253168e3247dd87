#pragma once

// What the background loop needs from the data plane (ops/cpu_executor.h implements it on the
// CPU, cuda/cuda_executor.h on GPUs): run one response of the plan, a single tensor or a fused
// bucket, over this rank's entries. Joins, barriers and error responses never reach it; the
// loop completes those.
//
// Synchronous executors (the CPU's) implement execute() only. An asynchronous one (CUDA: the
// work is queued on a device stream) overrides submit() and ends each bucket later, from a
// thread of its own (Horovod's finalizer thread and Status::InProgress), and drain().

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/message.h"
#include "core/status.h"
#include "core/tensor_queue.h"

namespace zen {

struct ExecPhase {
  std::string name;  // FUSE, HASH, PUSH, AGGREGATE, PULL, DECODE, ALLREDUCE, UNFUSE, ...
  std::chrono::steady_clock::time_point start;
  std::chrono::steady_clock::time_point end;
};

// What one bucket did on this rank: the timeline's phases and arguments, the stats' counters.
struct BucketReport {
  std::vector<ExecPhase> phases;  // in order, FUSE first
  uint64_t bytesSent = 0;         // data-plane payload bytes of this bucket
  uint64_t bytesReceived = 0;
  std::string scheme;      // the sparse scheme that ran, or the dense collective
  double imbalance = 1.0;  // the scheme's max/mean load (sparse)
  int64_t nnz = 0;         // rows this rank contributed (sparse)
  int64_t rows = 0;        // rows of the bucket's (virtual) tensor
  int64_t denseBytes = 0;  // dense bytes of the bucket, what the fusion threshold counts
};

class Executor {
 public:
  virtual ~Executor() = default;

  // entries[i] is this rank's entry for response.tensorNames[i], or null when this rank has
  // joined and did not post it: it then contributes zeros (allreduce), no rows (sparse,
  // allgather) or receives into scratch memory (broadcast). Outputs go into the entries
  // (output views, the handle's OpResult). An error fails the whole bucket; kIoError,
  // kTimeout and kAborted mean this rank's data plane is broken for good.
  virtual Status execute(const Response& response,
                         const std::vector<TensorEntry*>& entries,
                         BucketReport* report) = 0;

  // How a submitted bucket ends: exactly once, with execute()'s status and report.
  using BucketDone = std::function<void(const Status& status, BucketReport report)>;

  // What the loop calls. The default runs execute() and calls done before returning. An
  // asynchronous executor may return first and call done later from another thread, once the
  // bucket's work has ended; until then the bucket's entries stay queued (their names in
  // flight, their tensors in use), and `entries` and `response` stay valid.
  virtual void submit(const Response& response,
                      const std::vector<TensorEntry*>& entries,
                      const BucketDone& done) {
    BucketReport report;
    const Status status = execute(response, entries, &report);
    done(status, std::move(report));
  }

  // Returns once every bucket submitted so far has called its done (the loop calls it before
  // it fails the pending entries at shutdown). Nothing is ever in flight in a synchronous one.
  virtual void drain() {}

  // On the enqueuing (framework) thread, before the entry is queued: refuses tensors this
  // executor cannot run and prepares those it can (cuda/: records the ready event on the
  // framework's stream). The default takes host tensors only.
  virtual Status accept(TensorEntry& entry);

  // Process set `id` (core/message.h) now exists with these members (job ranks, ascending):
  // called on the background thread of its members only, in plan order, so every member
  // registers its sets in the same order (a backend may need that: MPI_Comm_create_group).
  // Later responses with processSet == id run over the set's ranks, numbered within it. An
  // error means this rank cannot take part in the set's collectives. The default refuses.
  virtual Status addProcessSet(int32_t id, const std::vector<int32_t>& members);
  // Set `id` is gone (its members, in plan order); no response of it follows.
  virtual void removeProcessSet(int32_t id) { (void)id; }

  // This rank's data plane broke outside the executor's own calls (a staged bucket's device
  // copy, cuda/host_staging.h), so it cannot take part in the collectives its peers run: the
  // executor gives its transport up (peers waiting on it fail at once instead of at their
  // timeout), and every later bucket fails. The default has nothing to give up.
  virtual void abandon(const Status& why) { (void)why; }
};

// The device an entry's tensors live on (sparse input, else dense input, else output).
inline Device entryDevice(const TensorEntry& e) {
  return e.request.op == OpType::kSparseAllreduce ? e.sparseInput.device : e.input.device;
}

inline Status Executor::accept(TensorEntry& entry) {
  const Device device = entryDevice(entry);
  if (device.kind == Device::Kind::kCpu) return Status::ok();
  return ZEN_ERROR(StatusCode::kInvalidArgument,
                   "tensor '{}' is on {}, but this zen runtime takes host tensors only (zen was "
                   "built without CUDA: configure with ZEN_WITH_CUDA=ON on a machine with nvcc)",
                   entry.request.name, device.toString());
}

inline Status Executor::addProcessSet(int32_t id, const std::vector<int32_t>& members) {
  (void)members;
  return ZEN_ERROR(StatusCode::kUnimplemented,
                   "process set {}: this executor runs collectives over the whole job only", id);
}

}  // namespace zen
