#pragma once

// The state behind the C API (bindings/c_api.h) and the framework bindings: one Runtime and
// the table of operations handed out as integer handles. An Api is an ordinary object (tests
// run several, one per in-process rank); the C API uses exactly one of them, processApi(),
// which is the only process-wide state Zen has.
//
// Handles: enqueue gives each operation a positive id, never reused within the process. The
// id stays valid, with its status and outputs (the sparse result, the gathered tensor,
// alltoall's output and received splits, the last joined rank), until release(). The runtime's
// callback moves the outputs into the record and then calls the caller's completion, so a
// completion may read them (on the background thread, quickly).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bindings/placement.h"
#include "core/config.h"
#include "core/runtime.h"

namespace zen::bindings {

// Called on the background thread when an operation ends (after its outputs are readable).
using Completion = std::function<void(int64_t id, const Status& status)>;

class Api {
 public:
  using Factory = std::function<Result<std::unique_ptr<Runtime>>(const Config&)>;

  Api() = default;
  // Shuts the runtime down if it still runs.
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Config from the environment, the runtime from bindings::createRuntime (TCP under zenrun,
  // MPI under mpirun, else a single rank). Returns OK at once when already initialized.
  Status init();
  // The same with a given config and factory (tests: in-process ranks, ephemeral ports).
  // backend names the transport for placement().
  Status init(Config config, const Factory& factory, std::string backend);
  // Stops this rank's runtime (every rank stops with it) and drops it; handles stay
  // readable. After an MPI runtime, init() is refused: MPI cannot start twice.
  // From a completion (this Api's or another in-process rank's) it asks for the stop and
  // returns at once: the runtime stops after this cycle and is torn down on a thread of the
  // Api's own (joined by the next shutdown() or init() outside completions, or ~Api).
  // init() from a completion returns OK when initialized, else kFailedPrecondition.
  Status shutdown();
  bool initialized() const;
  Result<Placement> placement() const;

  // All or none, as Runtime::enqueueGroup; done (may be empty) per operation.
  Result<std::vector<int64_t>> enqueue(std::vector<TensorOp> ops, std::vector<Completion> done);
  Result<int64_t> enqueue(TensorOp op, Completion done = {});

  // Whether the operation has ended.
  Result<bool> poll(int64_t id) const;
  // The operation's status once it ends within timeoutSeconds (< 0: no limit);
  // *finished = false and OK while it is still pending.
  Status wait(int64_t id, double timeoutSeconds, bool* finished) const;
  // Its outputs, once ended or inside its completion; valid until release(id).
  Result<const OpResult*> result(int64_t id) const;
  // Forgets the handle. Releasing one still pending is allowed: its completion still runs,
  // but the caller must keep the tensors it handed in alive until then.
  Status release(int64_t id);
  size_t handleCount() const;

  // Process sets (core/message.h "Process sets"). Collectives of the whole job: every rank
  // calls addProcessSet with the same ranks (any order) and removeProcessSet with the same id,
  // in the same order as its other adds and removes. Each blocks until every rank has
  // registered (removed) the set, at most ZEN_TIMEOUT (kTimeout: the operation stays posted);
  // a refusal (ranks that differ between the ranks, a duplicate, a rank outside the job, an
  // unknown id, the global set) fails on every rank. Not from a completion.
  Result<int32_t> addProcessSet(std::vector<int32_t> ranks);
  Status removeProcessSet(int32_t id);
  // Set id's ranks in the job, ascending (kGlobalProcessSet: every rank); kInvalidArgument
  // for an id this rank does not know (never added, or removed).
  Result<std::vector<int32_t>> processSetRanks(int32_t id) const;

  Result<RuntimeStats> stats() const;
  // The settings this runtime started with (ZEN_* and their HOROVOD_* aliases); the
  // autotuner's later points are stats().tunedParameters.
  Result<Config> config() const;
  Status startTimeline(const std::string& path, bool markCycles);
  Status stopTimeline();

  // The message of the last failed call made on the calling thread (C API), "" if none.
  const char* lastError() const;
  void setLastError(const std::string& message) const;

 private:
  struct Record {
    Handle handle;
    OpResult result;
    std::atomic<bool> ready{false};  // result moved in (the callback ran)
  };

  std::shared_ptr<Runtime> runtime() const;
  // Enqueues op, waits for it (ZEN_TIMEOUT at most) and returns its result; what: its name
  // in errors. addProcessSet and removeProcessSet.
  Result<OpResult> runToEnd(TensorOp op, const std::string& what);
  Result<std::shared_ptr<Record>> find(int64_t id) const;
  // runtime_'s deleter: deletes rt, or in a completion or on one of rt's callback threads
  // (where it would wait for a loop that waits for it) hands the delete to a reaper thread.
  void retire(Runtime* rt);
  // Outside completions: waits for every shutdown() in progress and every reaper.
  void waitForTeardown();

  // init and shutdown's swap, one at a time; never held while a runtime drains (its
  // completions may call shutdown() or init()), and never taken in a completion.
  std::mutex lifecycleMu_;
  mutable std::mutex mu_;  // the fields below
  std::condition_variable drained_;
  int draining_ = 0;  // shutdown() calls between the swap and the runtime's end
  std::shared_ptr<Runtime> runtime_;
  Config config_;
  Placement placement_;
  bool mpiFinalized_ = false;
  int64_t nextId_ = 1;
  std::unordered_map<int64_t, std::shared_ptr<Record>> records_;

  std::mutex reapMu_;
  std::vector<std::thread> reapers_;  // each deletes a runtime dropped in a completion

  mutable std::mutex errorMu_;
  mutable std::map<std::thread::id, std::string> lastError_;
};

// The process's Api, used by every C API call (created on first use, destroyed at exit).
Api& processApi();

}  // namespace zen::bindings
