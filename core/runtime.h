#pragma once

// The daemon (ARCHITECTURE.md "The shape in one paragraph"; Horovod's background loop). A
// Runtime owns one background thread, the queue of enqueued tensors, the timeline and the
// stats, and drives three interfaces core declares: the control channel, the negotiator
// (controller/) and the executor (ops/). No globals: tests run several Runtimes, one per
// rank, in one process. bindings/runtime_factory.h assembles one from Config.
//
// Every cycle (at most ZEN_CYCLE_TIME apart; an enqueue wakes the loop early):
//   1. hand the requests enqueued since the last cycle to the negotiator;
//   2. negotiate (collective): every rank gets the same plan, in one global order;
//   3. if the plan says shut down: agree on why (one gather + broadcast), fail every pending
//      handle with that cause, refuse new work, stop;
//   4. otherwise execute the plan's responses in order and complete their handles.
// A failed control channel stops the rank at once with the channel's error (which names the
// rank that failed first); a failed data plane makes the rank ask for shutdown, so the others
// learn the cause in the next cycle.

#include <spdlog/logger.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/control_channel.h"
#include "core/executor.h"
#include "core/handle.h"
#include "core/negotiator.h"
#include "core/process_sets.h"
#include "core/runtime_stats.h"
#include "core/tensor_queue.h"
#include "core/timeline.h"

namespace zen {

// What a launch established while its ranks connected (bindings/runtime_factory.cc), which
// the bindings report (zen_is_homogeneous, zen_mpi_threads_supported) without a collective.
struct LaunchFacts {
  bool homogeneous = true;           // every host runs as many ranks (the same on every rank)
  bool mpiThreadsSupported = false;  // MPI provided MPI_THREAD_MULTIPLE (MPI backend only)
};

struct RuntimeOptions {
  int rank = 0;
  int size = 1;
  LaunchFacts launch;
  double cycleTimeMs = 1.0;  // ZEN_CYCLE_TIME
  std::string timeline;      // ZEN_TIMELINE: a path (".rank<N>" is inserted), DYNAMIC or off
  bool timelineMarkCycles = false;
  std::shared_ptr<spdlog::logger> logger;  // null: a logger at ZEN_LOG_LEVEL for this rank

  static RuntimeOptions fromConfig(const Config& config, int rank, int size);
};

// The name of the join and barrier requests (one of each in flight per rank).
inline constexpr const char* kBarrierTensorName = "barrier.noname";

// One operation to enqueue; build it with the named constructors.
struct TensorOp {
  Request request;  // name, op, reduce op, root; dtype, shape and device come from the views
  SparseView sparseInput;
  DenseView input;
  DenseView output;
  Callback callback;
  ReadySignal ready;  // device tensors (core/tensor.h)

  // Row-sparse gradients (torch sparse COO, tf.IndexedSlices). With denseOutput.data null
  // the result is a coalesced SparseTensor in the handle's OpResult; otherwise denseOutput
  // ([numRows x rowSize], same dtype) receives the dense result.
  static TensorOp sparseAllreduce(std::string name,
                                  SparseView input,
                                  ReduceOp op = ReduceOp::kAverage,
                                  DenseView denseOutput = {});
  // output may alias input.
  static TensorOp allreduce(std::string name,
                            DenseView input,
                            DenseView output,
                            ReduceOp op = ReduceOp::kAverage);
  // Ranks may differ in the first dimension; the result is in the handle's OpResult.
  static TensorOp allgather(std::string name, DenseView input);
  // In place: the root's tensor overwrites every other rank's.
  static TensorOp broadcast(std::string name, DenseView tensor, int rootRank);
  // Horovod's alltoall: splits[d] rows of the first dimension (in order) go to rank d, empty
  // splits split it equally; the result, what every rank sent here concatenated in rank order,
  // and the received splits are in the handle's OpResult. Ranks may differ in the first
  // dimension and the splits; rank 0 checks them (every rank fails on a bad one).
  static TensorOp alltoall(std::string name, DenseView input, std::vector<int64_t> splits = {});
  // Horovod's reducescatter: the tensor reduced over all ranks (same shape everywhere), of
  // which this rank keeps its piece of the first dimension in output, [scatterRows(rows,
  // size, rank), ...] (core/message.h).
  static TensorOp reducescatter(std::string name,
                                DenseView input,
                                DenseView output,
                                ReduceOp op = ReduceOp::kAverage);
  // This rank has no more data; it completes when every rank has joined (OpResult's
  // lastJoinedRank). Meanwhile this rank contributes zeros / no rows to the others'
  // reductions and gathers.
  static TensorOp join();
  static TensorOp barrier();
  // Horovod's add_process_set: every rank of the job enqueues it, in the same order, with the
  // same ranks (any order; duplicates or ranks outside the job fail it on every rank). It
  // completes once every rank has registered the set; OpResult::processSet is its id. Named
  // by enqueue ("process_set.add.<k>", the k-th on this rank).
  static TensorOp addProcessSet(std::vector<int32_t> ranks);
  // Every rank of the job enqueues it; tensors of the set still pending then fail everywhere.
  // The global set cannot be removed.
  static TensorOp removeProcessSet(int32_t id);

  // Runs this collective over process set `id` (core/message.h "Process sets"); rank numbers
  // it names (broadcast's root, alltoall's splits) are then within the set. Only members
  // enqueue it.
  TensorOp& inProcessSet(int32_t id) {
    request.processSet = id;
    return *this;
  }

  TensorOp& withCallback(Callback cb) {
    callback = std::move(cb);
    return *this;
  }
  TensorOp& withReady(ReadySignal signal) {
    ready = signal;
    return *this;
  }
};

class Runtime {
 public:
  // Opens the timeline (ZEN_TIMELINE path) and starts the background loop. finalizer runs
  // last in the destructor, after the loop and the channel and executor are gone (say,
  // MPI_Finalize when the factory initialized MPI).
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options,
                                                 std::unique_ptr<ControlChannel> channel,
                                                 std::unique_ptr<Negotiator> negotiator,
                                                 std::unique_ptr<Executor> executor,
                                                 std::function<void()> finalizer = {});
  // Asks for shutdown (if still running) and waits for the loop. Never from this runtime's
  // own callbacks (onCallbackThread()): a thread cannot wait for itself, so that aborts with
  // a message. Whoever may drop the last reference there hands the teardown to another
  // thread (bindings::Api does).
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  const LaunchFacts& launch() const { return options_.launch; }
  // Process set `id`'s ranks in the job, ascending, once this rank has registered it; empty
  // for an unknown or removed id. Thread-safe.
  std::vector<int32_t> processSetRanks(int32_t id) const;

  // Never waits on communication. An error means nothing was enqueued: a malformed request,
  // a name already in flight here, a post after join, or a runtime that has stopped (the
  // cause it stopped with).
  Result<Handle> enqueue(TensorOp op);
  // All or none; the group reaches the same cycle, so it fuses as well as it can.
  Result<std::vector<Handle>> enqueueGroup(std::vector<TensorOp> ops);

  // Asks every rank to stop (agreed in the next cycle; the others' pending handles fail with
  // "shut down by rank <this> at user request") and waits for this rank's loop to end, at
  // most about ZEN_TIMEOUT when a peer does not answer. Returns the cause the job stopped
  // with when it was not this request. Safe from any thread; on this runtime's own callback
  // threads it does not wait. From another in-process runtime's callback use
  // requestShutdown(): this loop's last cycle needs that runtime's loop, which waits there.
  Status shutdown();
  // The request alone: never waits.
  void requestShutdown();
  // OK while the loop runs; afterwards why it stopped.
  Status status() const;
  bool running() const { return !stopped_.load(); }
  // Whether the calling thread runs this runtime's callbacks: its background thread, or an
  // asynchronous executor's thread while it completes this runtime's handles.
  bool onCallbackThread() const;

  // ZEN_TIMELINE=DYNAMIC only: start or stop writing a timeline (per rank, ".rank<N>" is
  // inserted into the path).
  Status startTimeline(const std::string& path, bool markCycles);
  Status stopTimeline();
  // The path this rank's timeline is written to, empty when off.
  std::string timelinePath() const;

  RuntimeStats stats() const;

 private:
  Runtime(RuntimeOptions options,
          std::unique_ptr<ControlChannel> channel,
          std::unique_ptr<Negotiator> negotiator,
          std::unique_ptr<Executor> executor,
          std::function<void()> finalizer);

  Result<std::unique_ptr<TensorEntry>> makeEntry(TensorOp op) const;
  // The rank and size the request has in its process set; canonicalizes an add's ranks.
  Result<SetPlace> placeRequest(Request& q) const;
  std::shared_ptr<Timeline> timeline() const;

  // The background thread.
  void loop();
  bool runCycle();
  void execute(const Response& response, std::chrono::steady_clock::time_point planned);
  // Registers or forgets a process set (every rank, in plan order) and completes the request.
  void changeProcessSets(const Response& response);
  // A bucket handed to the executor, kept until it ends (an asynchronous executor ends it
  // later, on a thread of its own: Executor::submit).
  struct Submitted {
    Response response;
    std::vector<TensorEntry*> entries;
    std::chrono::steady_clock::time_point planned;
    std::chrono::steady_clock::time_point start;
    int64_t bucket = 0;
  };
  void complete(const Submitted& bucket, const Status& status, const BucketReport& report);
  // The loop takes over a data-plane failure an asynchronous bucket reported.
  void takeAsyncFailure();
  // A join or barrier response, completed once every bucket this rank submitted before it
  // has ended (at once with a synchronous executor).
  struct Deferred {
    Response response;
    std::vector<TensorEntry*> entries;
    std::chrono::steady_clock::time_point planned;
    std::chrono::steady_clock::time_point start;
    int64_t before = 0;  // the buckets it waits for: those with a lower index
  };
  // Completes, in order, the deferred responses whose earlier buckets have all ended.
  void completeDeferred();
  void record(const Response& response,
              const std::vector<TensorEntry*>& entries,
              const BucketReport& report,
              int64_t bucket,
              std::chrono::steady_clock::time_point planned,
              std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end,
              const Status& status);
  // Completes this rank's entry of `name` (null: it has none in that response; nothing to do).
  void finish(const std::string& name, const TensorEntry* entry, const Status& status);
  // The same for each tensor of a response.
  void finishAll(const Response& response,
                 const std::vector<TensorEntry*>& entries,
                 const Status& status);
  // The cause every rank stops with; *userRequest: a rank asked (not a failure or a stall),
  // *byThisRank: this one.
  Status agreeOnCause(const CycleResult& cycle, bool* userRequest, bool* byThisRank);
  void stop(const Status& why, bool userRequest = false, bool byThisRank = false);

  const RuntimeOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<ControlChannel> channel_;
  std::unique_ptr<Negotiator> negotiator_;
  std::unique_ptr<Executor> executor_;
  std::function<void()> finalizer_;
  TensorQueue queue_;
  ProcessSetTable processSets_;
  std::mutex addMu_;  // names add_process_set requests in enqueue order
  int64_t adds_ = 0;  // add_process_set requests enqueued on this rank

  std::atomic<bool> shutdownRequested_{false};
  std::atomic<bool> stopped_{false};
  Status dataFailure_;   // background thread: the data plane broke on this rank
  int64_t buckets_ = 0;  // background thread: buckets this rank executed, in plan order
  double cycleTimeMs_;   // background thread: ZEN_CYCLE_TIME, or the autotuner's latest

  mutable std::mutex mu_;  // status_, stats_, timeline_, asyncFailure_
  Status status_;
  Status asyncFailure_;  // a bucket that ended on the executor's thread broke the data plane
  bool stoppedByThisRank_ = false;  // the cause is this rank's own shutdown request
  RuntimeStats stats_;
  std::shared_ptr<Timeline> timeline_;

  std::mutex deferMu_;               // inFlight_, deferred_, completingDeferred_
  std::set<int64_t> inFlight_;       // indices of the buckets submitted and not yet ended
  std::deque<Deferred> deferred_;    // in plan order
  bool completingDeferred_ = false;  // a thread is completing deferred responses

  std::mutex joinMu_;
  std::thread thread_;
  // The threads running this runtime's callbacks (onCallbackThread()): the background thread
  // until it is joined (a later thread may get its id), and an asynchronous executor's while
  // it completes handles here (a callback there may call shutdown(), which then must not
  // wait: the loop may be draining that executor). Several at once, or one twice (nested).
  mutable std::mutex callbackMu_;
  std::vector<std::thread::id> callbackThreads_;
  void addCallbackThread();
  void removeCallbackThread(std::thread::id id);
};

}  // namespace zen
