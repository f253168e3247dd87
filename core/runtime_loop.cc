// The background loop of the Runtime (core/runtime.h): cycle, execute, record, stop.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/runtime.h"

namespace zen {
namespace {

using Clock = std::chrono::steady_clock;

std::string describe(const Status& s) {
  return fmt::format("{}: {}", statusCodeName(s.code()), s.message());
}

// The data plane cannot be used again after these (ops/transport.h).
bool breaksTransport(const Status& s) {
  return s.code() == StatusCode::kIoError || s.code() == StatusCode::kTimeout ||
         s.code() == StatusCode::kAborted;
}

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Why a rank asks to stop, most telling first: the cause the job reports is the best reason
// any rank gave, the lowest rank breaking ties. A rank whose transport failed only because a
// peer aborted (the transports word it "rank N aborted after an error (why)") reports a
// consequence; the rank that failed first reports the cause.
enum class StopKind : uint8_t { kFailure = 0, kConsequence = 1, kStall = 2, kUser = 3, kNone = 4 };

bool isConsequence(const Status& s) {
  return s.message().find("aborted after an error") != std::string::npos;
}

}  // namespace

void Runtime::loop() {
  auto next = Clock::now();
  for (;;) {
    queue_.waitForWork(next);
    next = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double, std::milli>(cycleTimeMs_));
    if (!runCycle()) break;
  }
}

bool Runtime::runCycle() {
  const auto now = Clock::now();
  const std::shared_ptr<Timeline> tl = timeline();
  if (tl) tl->markCycle();
  for (TensorEntry* e : queue_.takeNew()) {
    const Status posted = negotiator_->post(e->request, now);
    if (!posted.isOk()) finish(e->request.name, e, posted);
  }

  takeAsyncFailure();
  const bool wantStop = shutdownRequested_.load() || !dataFailure_.isOk();
  Result<CycleResult> result = negotiator_->runCycle(*channel_, wantStop, now);
  if (!result.isOk()) {
    stop(ZEN_ERROR(StatusCode::kAborted, "zen stopped on rank {}: the control channel failed: {}",
                   rank(), describe(result.status())));
    return false;
  }
  const CycleResult& cycle = result.value();
  const auto planned = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.cycles;
    ++(cycle.fastPath ? stats_.fastPathCycles : stats_.slowPathCycles);
    stats_.cacheHits += cycle.cachedNames.size();
    for (const std::string& name : cycle.cachedNames) ++stats_.tensors[name].cacheHits;
    if (!cycle.stallWarning.empty()) {
      ++stats_.stallWarnings;
      stats_.lastStallWarning = cycle.stallWarning;
    }
    if (cycle.plan.parameters) {
      ++stats_.parameterUpdates;
      stats_.tunedParameters = cycle.plan.parameters;
    }
  }
  // The autotuner's parameters hold from this plan on, on every rank (the negotiator has
  // switched the fusion threshold already).
  if (cycle.plan.parameters) cycleTimeMs_ = cycle.plan.parameters->cycleTimeMs;
  if (tl) {
    for (const NegotiationTick& tick : cycle.ticks) {
      tl->instantAt(tick.name, std::to_string(tick.rank), planned);
    }
  }
  if (cycle.plan.shutdown) {
    bool userRequest = false;
    bool byThisRank = false;
    const Status cause = agreeOnCause(cycle, &userRequest, &byThisRank);
    stop(cause, userRequest, byThisRank);
    return false;
  }
  for (const Response& response : cycle.plan.responses) execute(response, planned);
  return true;
}

void Runtime::execute(const Response& response, Clock::time_point planned) {
  if (isRegistration(response.type)) {
    changeProcessSets(response);
    return;
  }
  // A set's collectives are its members' alone; an error reaches whoever posted the name there.
  if (response.type != ResponseType::kError && !processSets_.place(response.processSet)) return;
  std::vector<TensorEntry*> entries;
  entries.reserve(response.tensorNames.size());
  // An entry still in an earlier bucket (in flight) is not this response's: take() gives null.
  for (const std::string& name : response.tensorNames) {
    entries.push_back(queue_.take(name, response.processSet));
  }

  const auto start = Clock::now();
  Status status;
  BucketReport report;
  switch (response.type) {
    case ResponseType::kError:
      status = Status(StatusCode::kInvalidArgument, response.errorMessage);
      break;
    case ResponseType::kJoin:
    case ResponseType::kBarrier: {
      // Every rank has posted it (the negotiation was the barrier), but it completes only
      // after every bucket this rank submitted before it has ended (Horovod's barrier: the
      // ops posted before it are done; after a join the names are free to post again). With
      // an asynchronous executor some may still be in flight: the response waits here and
      // the last of them completes it (complete()), while this loop keeps cycling. Not
      // Executor::drain() here: it would stall negotiation for every rank meanwhile, and a
      // CUDA bucket that hangs is only aborted by this thread (NcclComm::requestAbort).
      {
        std::lock_guard<std::mutex> lock(deferMu_);
        deferred_.push_back(Deferred{response, entries, planned, start, buckets_});
      }
      completeDeferred();  // nothing in flight (always so on the CPU): completes it now
      return;
    }
    default: {
      takeAsyncFailure();
      const int64_t bucket = buckets_++;
      if (!dataFailure_.isOk()) {
        status = ZEN_ERROR(StatusCode::kAborted, "rank {}: the data plane failed earlier: {}",
                           rank(), describe(dataFailure_));
        record(response, entries, report, bucket, planned, start, Clock::now(), status);
        finishAll(response, entries, status);
        return;
      }
      // The executor may end the bucket here (the CPU's) or later on its own thread (CUDA's);
      // either way complete() records it and completes its handles.
      auto submitted =
          std::make_shared<Submitted>(Submitted{response, entries, planned, start, bucket});
      {
        std::lock_guard<std::mutex> lock(deferMu_);
        inFlight_.insert(bucket);
      }
      executor_->submit(
          submitted->response, submitted->entries,
          [this, submitted](const Status& s, BucketReport r) { complete(*submitted, s, r); });
      takeAsyncFailure();
      return;
    }
  }
  record(response, entries, report, -1, planned, start, Clock::now(), status);
  finishAll(response, entries, status);
}

void Runtime::changeProcessSets(const Response& response) {
  const std::string& name = response.tensorNames.front();
  TensorEntry* entry = queue_.take(name, requestSetOf(response));
  const int32_t id = response.processSet;
  Status status;
  if (response.type == ResponseType::kAddProcessSet) {
    processSets_.learn(response);
    if (rankInSet(response.members, rank()) >= 0) {
      status = executor_->addProcessSet(id, response.members);
    }
    if (entry != nullptr && status.isOk()) entry->handle->result().processSet = id;
  } else {
    const bool member = processSets_.place(id).has_value();
    processSets_.learn(response);
    if (member) {
      executor_->drain();  // the set's buckets still on a device end first
      executor_->removeProcessSet(id);
    }
  }
  if (breaksTransport(status)) {
    log_->error("process set {}: the data plane failed; asking every rank to stop: {}", id,
                status.toString());
    if (dataFailure_.isOk()) dataFailure_ = status;
  }
  finish(name, entry, status);
}

void Runtime::complete(const Submitted& bucket, const Status& status, const BucketReport& report) {
  if (breaksTransport(status)) {
    log_->error("the data plane failed; asking every rank to stop: {}", status.toString());
    std::lock_guard<std::mutex> lock(mu_);
    if (asyncFailure_.isOk()) asyncFailure_ = status;  // the loop takes it over
  }
  record(bucket.response, bucket.entries, report, bucket.bucket, bucket.planned, bucket.start,
         Clock::now(), status);
  addCallbackThread();  // on the executor's thread, a callback's shutdown() must not wait
  finishAll(bucket.response, bucket.entries, status);
  {
    std::lock_guard<std::mutex> lock(deferMu_);
    inFlight_.erase(bucket.bucket);
  }
  completeDeferred();  // a join or barrier that waited for this bucket
  removeCallbackThread(std::this_thread::get_id());
}

void Runtime::completeDeferred() {
  std::unique_lock<std::mutex> lock(deferMu_);
  // One thread at a time (the loop's or the executor's), so they complete in plan order; the
  // one doing it looks again before it stops, so a response deferred meanwhile is not missed.
  if (completingDeferred_) return;
  completingDeferred_ = true;
  for (;;) {
    std::vector<Deferred> ready;
    while (!deferred_.empty() &&
           (inFlight_.empty() || *inFlight_.begin() >= deferred_.front().before)) {
      ready.push_back(std::move(deferred_.front()));
      deferred_.pop_front();
    }
    if (ready.empty()) break;
    lock.unlock();
    for (const Deferred& d : ready) {
      if (d.response.type == ResponseType::kJoin) {
        if (d.entries.front() != nullptr) {
          d.entries.front()->handle->result().lastJoinedRank = d.response.lastJoinedRank;
        }
        queue_.joinCompleted();
      }
      record(d.response, d.entries, BucketReport{}, -1, d.planned, d.start, Clock::now(),
             Status::ok());
      finishAll(d.response, d.entries, Status::ok());
    }
    lock.lock();
  }
  completingDeferred_ = false;
}

void Runtime::takeAsyncFailure() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dataFailure_.isOk() && !asyncFailure_.isOk()) dataFailure_ = asyncFailure_;
}

void Runtime::record(const Response& response,
                     const std::vector<TensorEntry*>& entries,
                     const BucketReport& report,
                     int64_t bucket,
                     Clock::time_point planned,
                     Clock::time_point start,
                     Clock::time_point end,
                     const Status& status) {
  const bool dataPlane = carriesTensors(response.type);
  std::string type = responseTypeName(response.type);
  for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double density =
      report.rows > 0 ? static_cast<double>(report.nnz) / static_cast<double>(report.rows) : 0;
  TimelineArgs args = {{"bucket", std::to_string(bucket)},
                       {"tensors", std::to_string(response.tensorNames.size())}};
  if (dataPlane) {
    args.insert(args.end(), {{"bytes_sent", std::to_string(report.bytesSent)},
                             {"bytes_received", std::to_string(report.bytesReceived)},
                             {"dense_bytes", std::to_string(report.denseBytes)},
                             {"scheme", report.scheme}});
  }
  if (response.type == ResponseType::kSparseAllreduce) {
    args.insert(args.end(), {{"nnz", std::to_string(report.nnz)},
                             {"density", fmt::format("{:.6g}", density)},
                             {"imbalance", fmt::format("{:.4g}", report.imbalance)}});
  }
  if (!status.isOk()) args.emplace_back("error", status.message());

  std::lock_guard<std::mutex> lock(mu_);
  if (dataPlane) {
    ++stats_.bucketsExecuted;
    stats_.tensorsExecuted += response.tensorNames.size();
    stats_.bytesSent += report.bytesSent;
    stats_.bytesReceived += report.bytesReceived;
    ++stats_.bucketsByScheme[report.scheme];
    stats_.maxImbalance = std::max(stats_.maxImbalance, report.imbalance);
    for (const ExecPhase& p : report.phases) {
      stats_.phaseSeconds[p.name] += seconds(p.start, p.end);
    }
  }
  const std::shared_ptr<Timeline>& tl = timeline_;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry* e = entries[i];
    if (e == nullptr) continue;
    const std::string& name = response.tensorNames[i];
    TensorStats& ts = stats_.tensors[name];
    ts.phaseSeconds["NEGOTIATE"] += seconds(e->enqueued, planned);
    ts.phaseSeconds["QUEUE"] += seconds(planned, start);
    if (dataPlane) {
      const double share = report.denseBytes > 0 ? static_cast<double>(denseBytes(response, i)) /
                                                       static_cast<double>(report.denseBytes)
                                                 : 1.0 / static_cast<double>(entries.size());
      ts.bytesSent += static_cast<uint64_t>(share * static_cast<double>(report.bytesSent));
      ts.bytesReceived += static_cast<uint64_t>(share * static_cast<double>(report.bytesReceived));
      for (const ExecPhase& p : report.phases) ts.phaseSeconds[p.name] += seconds(p.start, p.end);
      ts.lastScheme = report.scheme;
      ts.lastImbalance = report.imbalance;
      ts.lastNnz = e->sparseInput.nnz;
      ts.lastBucket = bucket;
      ts.lastBucketSize = response.tensorNames.size();
    }
    if (!tl) continue;
    tl->span(name, "NEGOTIATE", e->enqueued, planned, {{"op", opTypeName(e->request.op)}});
    tl->span(name, "QUEUE", planned, start);
    tl->span(name, type, start, end, args);
    for (const ExecPhase& p : report.phases) tl->span(name, p.name, p.start, p.end);
  }
}

void Runtime::finishAll(const Response& response,
                        const std::vector<TensorEntry*>& entries,
                        const Status& status) {
  for (size_t i = 0; i < entries.size(); ++i) finish(response.tensorNames[i], entries[i], status);
}

void Runtime::finish(const std::string& name, const TensorEntry* e, const Status& status) {
  std::unique_ptr<TensorEntry> entry = queue_.remove(name, e);
  if (!entry) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TensorStats& ts = stats_.tensors[name];
    ++(status.isOk() ? ts.completed : ts.failed);
    ++(status.isOk() ? stats_.completed : stats_.failed);
  }
  entry->handle->complete(status);
}

Status Runtime::agreeOnCause(const CycleResult& cycle, bool* userRequest, bool* byThisRank) {
  StopKind kind = StopKind::kNone;
  std::string text;
  if (!dataFailure_.isOk()) {
    kind = isConsequence(dataFailure_) ? StopKind::kConsequence : StopKind::kFailure;
    text = fmt::format("rank {} failed: {}", rank(), describe(dataFailure_));
  } else if (cycle.stallShutdown) {
    kind = StopKind::kStall;
    std::string warning;
    {
      std::lock_guard<std::mutex> lock(mu_);
      warning = stats_.lastStallWarning;
    }
    text = fmt::format("shut down by rank {} after a stall: {}", rank(), warning);
  } else if (shutdownRequested_.load()) {
    kind = StopKind::kUser;
    text = fmt::format("shut down by rank {} at user request", rank());
  }
  // One byte of kind, then the text; rank 0 picks and broadcasts the cause.
  std::vector<uint8_t> mine(text.size() + 1);
  mine[0] = static_cast<uint8_t>(kind);
  std::copy(text.begin(), text.end(), mine.begin() + 1);
  std::vector<std::vector<uint8_t>> all;
  Status s = channel_->gather(mine, &all);
  std::vector<uint8_t> chosen;
  if (s.isOk() && rank() == 0) {
    const std::vector<uint8_t>* best = nullptr;
    for (const auto& reason : all) {
      if (!reason.empty() && (best == nullptr || reason[0] < (*best)[0])) best = &reason;
    }
    chosen = best != nullptr ? *best : std::vector<uint8_t>{};
  }
  if (s.isOk()) s = channel_->broadcast(&chosen);
  if (!s.isOk()) {
    *userRequest = kind == StopKind::kUser;
    *byThisRank = *userRequest;
    return ZEN_ERROR(StatusCode::kAborted,
                     "zen shut down: {} (the ranks could not agree on the cause: {})",
                     text.empty() ? "another rank asked" : text, describe(s));
  }
  std::string cause(chosen.begin() + (chosen.empty() ? 0 : 1), chosen.end());
  *userRequest = !chosen.empty() && chosen[0] == static_cast<uint8_t>(StopKind::kUser);
  *byThisRank = *userRequest && cause == text;
  if (cause.empty()) cause = "no rank gave a reason";
  return ZEN_ERROR(StatusCode::kAborted, "zen shut down: {}", cause);
}

void Runtime::stop(const Status& why, bool userRequest, bool byThisRank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.isOk()) {
      status_ = why;
      stoppedByThisRank_ = byThisRank;
    }
  }
  if (userRequest) {
    log_->info("{}", why.message());
  } else {
    log_->warn("{}", why.message());
  }
  // Buckets still on the device end first (their tensors are in use until then).
  executor_->drain();
  // Every bucket has ended, and with it every join or barrier that waited (complete()). Any
  // left (an executor whose drain() did not wait) fails with the rest below.
  completeDeferred();
  {
    std::lock_guard<std::mutex> lock(deferMu_);
    deferred_.clear();
  }
  std::vector<std::unique_ptr<TensorEntry>> pending = queue_.close(why);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : pending) {
      ++stats_.tensors[e->request.name].failed;
      ++stats_.failed;
    }
  }
  for (auto& e : pending) e->handle->complete(why);
  stopped_ = true;
}

}  // namespace zen
