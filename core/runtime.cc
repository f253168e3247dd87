// The Runtime's public side: creation, enqueue, shutdown, timeline control, stats
// (core/runtime.h). The background loop is in runtime_loop.cc.
#include "core/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/logging.h"

namespace zen {
namespace {

// "/x/trace.json" -> "/x/trace.rank3.json"; "/x/trace" -> "/x/trace.rank3". One file per rank:
// each rank's executor phases are its own (docs/architecture.md "Timeline").
std::string rankPath(const std::string& path, int rank) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    return path + tag;
  }
  return path.substr(0, dot) + tag + path.substr(dot);
}

constexpr const char* kDynamic = "DYNAMIC";

}  // namespace

RuntimeOptions RuntimeOptions::fromConfig(const Config& config, int rank, int size) {
  RuntimeOptions o;
  o.rank = rank;
  o.size = size;
  o.cycleTimeMs = config.cycleTimeMs;
  o.timeline = config.timeline;
  o.timelineMarkCycles = config.timelineMarkCycles;
  o.logger = makeLogger(rank, config.logLevel, !config.logHideTime);
  return o;
}

Runtime::Runtime(RuntimeOptions options,
                 std::unique_ptr<ControlChannel> channel,
                 std::unique_ptr<Negotiator> negotiator,
                 std::unique_ptr<Executor> executor,
                 std::function<void()> finalizer)
    : options_(std::move(options)),
      log_(options_.logger ? options_.logger : makeLogger(options_.rank, "warn")),
      channel_(std::move(channel)),
      negotiator_(std::move(negotiator)),
      executor_(std::move(executor)),
      finalizer_(std::move(finalizer)),
      queue_(options_.rank),
      processSets_(options_.rank, options_.size),
      cycleTimeMs_(options_.cycleTimeMs) {}

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options,
                                                 std::unique_ptr<ControlChannel> channel,
                                                 std::unique_ptr<Negotiator> negotiator,
                                                 std::unique_ptr<Executor> executor,
                                                 std::function<void()> finalizer) {
  ZEN_CHECK_ARG(channel && negotiator && executor,
                "a runtime needs a channel, a negotiator and "
                "an executor");
  ZEN_CHECK_ARG(channel->rank() == options.rank && channel->size() == options.size,
                "the control channel is rank {} of {}, the runtime rank {} of {}", channel->rank(),
                channel->size(), options.rank, options.size);
  ZEN_CHECK_ARG(options.cycleTimeMs >= 0, "cycle time {} ms", options.cycleTimeMs);
  std::unique_ptr<Runtime> rt(new Runtime(std::move(options), std::move(channel),
                                          std::move(negotiator), std::move(executor),
                                          std::move(finalizer)));
  const std::string& timeline = rt->options_.timeline;
  if (!timeline.empty() && timeline != kDynamic) {
    ZEN_ASSIGN_OR_RETURN(std::unique_ptr<Timeline> t,
                         Timeline::open(rankPath(timeline, rt->rank()), rt->rank(),
                                        rt->options_.timelineMarkCycles));
    rt->timeline_ = std::move(t);
  }
  {
    // Listed at once; no callback runs before create returns (nothing is queued yet).
    std::lock_guard<std::mutex> lock(rt->callbackMu_);
    rt->thread_ = std::thread([r = rt.get()] { r->loop(); });
    rt->callbackThreads_.push_back(rt->thread_.get_id());
  }
  return rt;
}

Runtime::~Runtime() {
  if (onCallbackThread()) {
    // shutdown() would return at once, and the loop (or the executor) still runs on this
    // very thread: tearing it down here ends in std::terminate or worse. Say why first.
    log_->critical(
        "a Runtime destroyed from one of its own callbacks; hand the last "
        "reference to another thread");
    log_->flush();
    std::abort();
  }
  (void)shutdown();
  // The data plane and the control channel close before whatever the finalizer tears down.
  executor_.reset();
  channel_.reset();
  negotiator_.reset();
  if (finalizer_) finalizer_();
}

Result<Handle> Runtime::enqueue(TensorOp op) {
  std::vector<TensorOp> ops;
  ops.push_back(std::move(op));
  ZEN_ASSIGN_OR_RETURN(std::vector<Handle> handles, enqueueGroup(std::move(ops)));
  return handles.front();
}

Result<std::vector<Handle>> Runtime::enqueueGroup(std::vector<TensorOp> ops) {
  // The k-th add_process_set of every rank pairs up by its name, so adds are numbered in the
  // order they reach the queue; one that fails does not take a number.
  std::unique_lock<std::mutex> adding(addMu_, std::defer_lock);
  int64_t adds = 0;
  for (TensorOp& op : ops) {
    if (op.request.op != OpType::kAddProcessSet) continue;
    if (!adding.owns_lock()) adding.lock();
    op.request.name = fmt::format("process_set.add.{}", adds_ + adds++);
  }
  std::vector<std::unique_ptr<TensorEntry>> entries;
  std::vector<Handle> handles;
  for (TensorOp& op : ops) {
    ZEN_ASSIGN_OR_RETURN(std::unique_ptr<TensorEntry> entry, makeEntry(std::move(op)));
    handles.emplace_back(entry->handle);
    entries.push_back(std::move(entry));
  }
  ZEN_RETURN_IF_ERROR(queue_.add(std::move(entries)));
  if (adds > 0) adds_ += adds;  // under addMu_, held since the first add
  return handles;
}

std::vector<int32_t> Runtime::processSetRanks(int32_t id) const {
  return processSets_.ranks(id);
}

void Runtime::requestShutdown() {
  shutdownRequested_ = true;
  queue_.interrupt();
}

Status Runtime::shutdown() {
  requestShutdown();
  // From a callback (the loop's own thread, or an asynchronous executor's while it completes
  // this runtime's handles): the loop ends after this cycle's agreement.
  if (onCallbackThread()) return Status::ok();
  {
    std::lock_guard<std::mutex> lock(joinMu_);
    if (thread_.joinable()) {
      const std::thread::id loop = thread_.get_id();
      thread_.join();
      removeCallbackThread(loop);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return stoppedByThisRank_ ? Status::ok() : status_;
}

bool Runtime::onCallbackThread() const {
  std::lock_guard<std::mutex> lock(callbackMu_);
  return std::find(callbackThreads_.begin(), callbackThreads_.end(), std::this_thread::get_id()) !=
         callbackThreads_.end();
}

void Runtime::addCallbackThread() {
  std::lock_guard<std::mutex> lock(callbackMu_);
  callbackThreads_.push_back(std::this_thread::get_id());
}

void Runtime::removeCallbackThread(std::thread::id id) {
  std::lock_guard<std::mutex> lock(callbackMu_);
  auto it = std::find(callbackThreads_.begin(), callbackThreads_.end(), id);
  if (it != callbackThreads_.end()) callbackThreads_.erase(it);
}

Status Runtime::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

Status Runtime::startTimeline(const std::string& path, bool markCycles) {
  if (options_.timeline != kDynamic) {
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "set ZEN_TIMELINE=DYNAMIC to start and stop the timeline at run time");
  }
  ZEN_ASSIGN_OR_RETURN(std::unique_ptr<Timeline> t,
                       Timeline::open(rankPath(path, rank()), rank(), markCycles));
  std::lock_guard<std::mutex> lock(mu_);
  timeline_ = std::move(t);
  return Status::ok();
}

Status Runtime::stopTimeline() {
  if (options_.timeline != kDynamic) {
    return ZEN_ERROR(StatusCode::kFailedPrecondition,
                     "set ZEN_TIMELINE=DYNAMIC to start and stop the timeline at run time");
  }
  std::shared_ptr<Timeline> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t.swap(timeline_);
  }
  if (t) t->flush();
  return Status::ok();
}

std::string Runtime::timelinePath() const {
  auto t = timeline();
  return t ? t->path() : std::string();
}

std::shared_ptr<Timeline> Runtime::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

RuntimeStats Runtime::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace zen
