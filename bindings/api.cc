// The state behind the C API: one runtime and the handle table (bindings/api.h).
#include "bindings/api.h"

#include <algorithm>
#include <utility>

#include "bindings/runtime_factory.h"

namespace zen::bindings {
namespace {

Status notInitialized() {
  return ZEN_ERROR(StatusCode::kFailedPrecondition,
                   "zen is not initialized: call zen_init() (hvd.init()) first");
}

// Set while this thread runs a completion of any Api. There it must not wait for a runtime's
// loop: its own runtime's loop may be this very thread (or be draining it), and another
// in-process rank's loop needs this rank's loop, which waits for the completion, to agree on
// its last cycle. Per thread and not per Api, since one rank's completion may call another
// rank's Api; the one thread_local Zen has (Runtime::onCallbackThread() knows only its own).
thread_local int tInCompletion = 0;

bool inCompletion() {
  return tInCompletion > 0;
}

// Marks the calling thread for the completion's length.
struct CompletionScope {
  CompletionScope() { ++tInCompletion; }
  ~CompletionScope() { --tInCompletion; }
  CompletionScope(const CompletionScope&) = delete;
  CompletionScope& operator=(const CompletionScope&) = delete;
};

}  // namespace

Api::~Api() {
  (void)shutdown();
  waitForTeardown();
}

// Why a reaper thread and not a detached teardown inside ~Runtime: ~Runtime on its own
// background thread runs while that thread is still inside loop(), a member of the object
// being destroyed, so the Runtime cannot free itself there at all. The last reference can
// end on such a thread whenever a completion calls shutdown() (or holds a copy from
// enqueue()/stats() while another thread's shutdown() drops the Api's). The deleter below
// hands that delete to a joinable thread the Api owns: ~Runtime there joins the loop
// (which returns from the callback and stops after this cycle) and then the executor. The
// same inside any other completion (another in-process rank's): ~Runtime would wait there for
// a loop whose last cycle needs the loop that waits for this completion.
void Api::retire(Runtime* rt) {
  if (!inCompletion() && !rt->onCallbackThread()) {
    delete rt;
    return;
  }
  std::lock_guard<std::mutex> lock(reapMu_);
  reapers_.emplace_back([rt] { delete rt; });
}

void Api::waitForTeardown() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [&] { return draining_ == 0; });
  }
  std::vector<std::thread> reapers;
  {
    std::lock_guard<std::mutex> lock(reapMu_);
    reapers.swap(reapers_);
  }
  for (std::thread& t : reapers) t.join();
}

Status Api::init() {
  if (initialized()) return Status::ok();
  ZEN_ASSIGN_OR_RETURN(Config config, Config::fromEnvironment());
  const Backend backend = backendFor(config);
  return init(
      std::move(config), [](const Config& c) { return createRuntime(c); }, backendName(backend));
}

Status Api::init(Config config, const Factory& factory, std::string backend) {
  if (inCompletion()) {
    // A completion may run while a shutdown() drains its runtime; waiting for that drain
    // here would wait for this very thread.
    std::lock_guard<std::mutex> lock(mu_);
    if (runtime_) return Status::ok();
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "zen cannot be initialized inside a completion callback");
  }
  std::lock_guard<std::mutex> lifecycle(lifecycleMu_);
  // The previous runtime is gone (its ports, its MPI) before a new one starts.
  waitForTeardown();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runtime_) return Status::ok();
    if (mpiFinalized_) {
      return ZEN_ERROR(StatusCode::kFailedPrecondition,
                       "zen ran over MPI in this process and shut down; MPI cannot be "
                       "initialized a second time");
    }
  }
  // start_timeline / stop_timeline work at run time unless ZEN_TIMELINE names a file.
  if (config.timeline.empty()) config.timeline = "DYNAMIC";
  // config.controllerFd goes to every init: an elastic worker that is rank 0 again hands a
  // fresh listening socket each round. A stale number (zenrun's socket, closed by the last
  // runtime) is left alone by the transport, which adopts only a socket listening on the
  // controller port (ops/tcp_rendezvous.cc).
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, factory(config));
  std::lock_guard<std::mutex> lock(mu_);
  placement_ = placementFor(config, rt->rank(), rt->size(), std::move(backend));
  placement_.launch = rt->launch();
  config_ = std::move(config);
  runtime_ = std::shared_ptr<Runtime>(rt.release(), [this](Runtime* r) { retire(r); });
  return Status::ok();
}

Status Api::shutdown() {
  const bool fromCompletion = inCompletion();
  std::shared_ptr<Runtime> rt;
  {
    // Held for the swap only: completions that run while the runtime drains may call
    // shutdown() or init(). A completion does not take it (init() may hold it while it
    // waits for this very drain).
    std::unique_lock<std::mutex> lifecycle(lifecycleMu_, std::defer_lock);
    if (!fromCompletion) lifecycle.lock();
    std::lock_guard<std::mutex> lock(mu_);
    rt.swap(runtime_);
    if (rt) {
      ++draining_;
      if (placement_.backend == backendName(Backend::kMpi)) mpiFinalized_ = true;
    }
  }
  Status status = Status::ok();
  if (rt) {
    // Outside mu_: failing the pending handles runs their completions, which read records.
    // In a completion only the request (see tInCompletion); rt's deleter then hands the
    // teardown to a reaper.
    if (fromCompletion) {
      rt->requestShutdown();
    } else {
      status = rt->shutdown();
    }
    rt.reset();
    std::lock_guard<std::mutex> lock(mu_);
    --draining_;
    drained_.notify_all();
  }
  // As before, shutdown() returns once every runtime this Api dropped has stopped, unless
  // it runs in a completion.
  if (!fromCompletion) waitForTeardown();
  return status;
}

bool Api::initialized() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_ != nullptr;
}

Result<Placement> Api::placement() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!runtime_) return notInitialized();
  return placement_;
}

std::shared_ptr<Runtime> Api::runtime() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_;
}

Result<std::vector<int64_t>> Api::enqueue(std::vector<TensorOp> ops, std::vector<Completion> done) {
  ZEN_CHECK_ARG(done.empty() || done.size() == ops.size(), "{} completions for {} operations",
                done.size(), ops.size());
  ZEN_CHECK_ARG(!ops.empty(), "nothing to enqueue");
  std::shared_ptr<Runtime> rt = runtime();
  if (!rt) return notInitialized();

  std::vector<int64_t> ids;
  std::vector<std::shared_ptr<Record>> records;
  {
    // Listed before the enqueue: a completion may run (and read its outputs) before
    // enqueue returns.
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < ops.size(); ++i) {
      ids.push_back(nextId_++);
      records.push_back(std::make_shared<Record>());
      records_.emplace(ids.back(), records.back());
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    std::weak_ptr<Record> weak = records[i];
    Completion completion = done.empty() ? Completion() : std::move(done[i]);
    ops[i].callback = [weak, id = ids[i], completion = std::move(completion)](const Status& status,
                                                                              OpResult& result) {
      if (auto record = weak.lock()) {
        record->result = std::move(result);
        record->ready = true;
      }
      if (completion) {
        CompletionScope scope;
        completion(id, status);
      }
    };
  }
  Result<std::vector<Handle>> handles = rt->enqueueGroup(std::move(ops));
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (handles.isOk()) {
      records[i]->handle = handles.value()[i];
    } else {
      records_.erase(ids[i]);
    }
  }
  if (!handles.isOk()) return handles.status();
  return ids;
}

Result<int64_t> Api::enqueue(TensorOp op, Completion done) {
  std::vector<TensorOp> ops;
  ops.push_back(std::move(op));
  std::vector<Completion> completions;
  if (done) completions.push_back(std::move(done));
  ZEN_ASSIGN_OR_RETURN(std::vector<int64_t> ids, enqueue(std::move(ops), std::move(completions)));
  return ids.front();
}

Result<std::shared_ptr<Api::Record>> Api::find(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) {
    return ZEN_ERROR(StatusCode::kInvalidArgument,
                     "unknown handle {}: never issued, or already released", id);
  }
  return it->second;
}

// The handle itself is written under mu_ once the enqueue returns; until then (only a
// completion can see the id) the operation counts as pending.
Result<bool> Api::poll(int64_t id) const {
  ZEN_ASSIGN_OR_RETURN(std::shared_ptr<Record> record, find(id));
  Handle handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handle = record->handle;
  }
  return handle.valid() && handle.poll();
}

Status Api::wait(int64_t id, double timeoutSeconds, bool* finished) const {
  *finished = false;
  ZEN_ASSIGN_OR_RETURN(std::shared_ptr<Record> record, find(id));
  Handle handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handle = record->handle;
  }
  if (!handle.valid()) return Status::ok();
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(std::max(timeoutSeconds, 0.0));
  for (;;) {
    double slice = 3600.0;
    if (timeoutSeconds >= 0) {
      slice = std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count();
      slice = std::max(slice, 0.0);
    }
    Status status = handle.wait(slice);
    if (handle.poll()) {
      *finished = true;
      return status;
    }
    if (timeoutSeconds >= 0 && std::chrono::steady_clock::now() >= until) return Status::ok();
  }
}

Result<const OpResult*> Api::result(int64_t id) const {
  ZEN_ASSIGN_OR_RETURN(std::shared_ptr<Record> record, find(id));
  if (!record->ready.load()) {
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "operation {} has not finished: wait for it (zen_wait, synchronize) first",
                     id);
  }
  return &record->result;
}

Status Api::release(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ZEN_CHECK_ARG(records_.erase(id) == 1, "unknown handle {}: never issued, or already released",
                id);
  return Status::ok();
}

size_t Api::handleCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.size();
}

Result<OpResult> Api::runToEnd(TensorOp op, const std::string& what) {
  if (inCompletion()) {
    // The set is registered by the loop that runs this completion: it would wait for itself.
    return ZEN_ERROR(StatusCode::kFailedPrecondition, "{} cannot run inside a completion callback",
                     what);
  }
  double timeout = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timeout = config_.timeoutSeconds;
  }
  ZEN_ASSIGN_OR_RETURN(int64_t id, enqueue(std::move(op)));
  bool finished = false;
  Status status = wait(id, timeout, &finished);
  if (!finished) {
    (void)release(id);  // it holds no tensors of the caller's; the daemon ends it later
    if (!status.isOk()) return status;
    return ZEN_ERROR(StatusCode::kTimeout,
                     "{} did not complete within ZEN_TIMEOUT ({} s): every rank of the job must "
                     "call it, in the same order as its other process set adds and removes",
                     what, timeout);
  }
  Result<const OpResult*> result = this->result(id);
  Result<OpResult> out = !status.isOk()  ? Result<OpResult>(status)
                         : result.isOk() ? Result<OpResult>(*result.value())
                                         : Result<OpResult>(result.status());
  (void)release(id);
  return out;
}

Result<int32_t> Api::addProcessSet(std::vector<int32_t> ranks) {
  ZEN_ASSIGN_OR_RETURN(OpResult result,
                       runToEnd(TensorOp::addProcessSet(std::move(ranks)), "add_process_set"));
  return result.processSet;
}

Status Api::removeProcessSet(int32_t id) {
  return runToEnd(TensorOp::removeProcessSet(id), "remove_process_set").status();
}

Result<std::vector<int32_t>> Api::processSetRanks(int32_t id) const {
  std::shared_ptr<Runtime> rt = runtime();
  if (!rt) return notInitialized();
  std::vector<int32_t> ranks = rt->processSetRanks(id);  // set 0: every rank
  ZEN_CHECK_ARG(!ranks.empty(), "unknown process set {}: never added, or removed", id);
  return ranks;
}

Result<RuntimeStats> Api::stats() const {
  std::shared_ptr<Runtime> rt = runtime();
  if (!rt) return notInitialized();
  return rt->stats();
}

Result<Config> Api::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!runtime_) return notInitialized();
  return config_;
}

Status Api::startTimeline(const std::string& path, bool markCycles) {
  std::shared_ptr<Runtime> rt = runtime();
  if (!rt) return notInitialized();
  ZEN_CHECK_ARG(!path.empty(), "start_timeline needs a file path");
  return rt->startTimeline(path, markCycles);
}

Status Api::stopTimeline() {
  std::shared_ptr<Runtime> rt = runtime();
  if (!rt) return notInitialized();
  return rt->stopTimeline();
}

const char* Api::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  // std::map nodes stay put and only this thread writes its own string, so the pointer stays
  // valid until this thread's next failing call.
  return lastError_[std::this_thread::get_id()].c_str();
}

void Api::setLastError(const std::string& message) const {
  std::lock_guard<std::mutex> lock(errorMu_);
  lastError_[std::this_thread::get_id()] = message;
}

Api& processApi() {
  static Api api;
  return api;
}

}  // namespace zen::bindings
