// Transport's backend-independent half: argument checks, the "broken after the first
// transport error" rule (shared by a transport and its subsets), the per-peer byte counters
// and subsets' numbering. Nothing here touches the wire.
#include "ops/transport.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "core/process_sets.h"

namespace zen::ops {
namespace {

const Status& statusOf(const Status& status) {
  return status;
}

template <typename T>
const Status& statusOf(const Result<T>& result) {
  return result.status();
}

}  // namespace

uint64_t TransportCounters::totalSent() const {
  return std::accumulate(bytesSent.begin(), bytesSent.end(), uint64_t{0});
}

uint64_t TransportCounters::totalReceived() const {
  return std::accumulate(bytesReceived.begin(), bytesReceived.end(), uint64_t{0});
}

TransportOptions TransportOptions::fromConfig(const Config& config) {
  TransportOptions options;
  options.rank = config.rank.value_or(0);
  options.size = config.size.value_or(1);
  options.timeoutSeconds = config.timeoutSeconds;
  return options;
}

Transport::Transport(int rank, int size, double timeoutSeconds)
    : rank_(rank),
      size_(size),
      timeoutSeconds_(timeoutSeconds),
      sent_(new std::atomic<uint64_t>[size]),
      received_(new std::atomic<uint64_t>[size]) {
  resetCounters();
}

template <typename Fn>
auto Transport::guarded(Fn&& fn) -> decltype(fn()) {
  const Status& failure = root_->failure_;
  if (!failure.isOk()) {
    return ZEN_ERROR(StatusCode::kAborted, "{}: the {} transport failed earlier: {}", who(),
                     backendName(), failure.message());
  }
  auto result = fn();
  const Status& status = statusOf(result);
  if (status.code() == StatusCode::kTimeout || status.code() == StatusCode::kIoError) {
    fail(status);
  }
  return result;
}

void Transport::failAll(const Status& why) {
  if (root_->failure_.isOk()) fail(why);
}

// The job's transport is aborted whichever member of the family failed: on the message
// backends a subset's messages share its connections and mailbox, so they are in an unknown
// state too.
void Transport::fail(const Status& why) {
  root_->failure_ = why;
  if (root_ != this) abort(why);
  root_->abort(why);
}

Status Transport::send(int peer, const void* data, size_t bytes, uint32_t tag) {
  ZEN_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_,
                "send: peer {} is not another rank of {} (this is rank {})", peer, size_, rank_);
  ZEN_CHECK_ARG(tag <= kMaxUserTag, "send: tag {} above the user maximum {}", tag, kMaxUserTag);
  ZEN_CHECK_ARG(data != nullptr || bytes == 0, "send: null buffer of {} bytes", bytes);
  return guarded([&] { return doSend(peer, data, bytes, tag); });
}

Status Transport::recv(int peer, void* data, size_t bytes, uint32_t tag) {
  ZEN_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_,
                "recv: peer {} is not another rank of {} (this is rank {})", peer, size_, rank_);
  ZEN_CHECK_ARG(tag <= kMaxUserTag, "recv: tag {} above the user maximum {}", tag, kMaxUserTag);
  ZEN_CHECK_ARG(data != nullptr || bytes == 0, "recv: null buffer of {} bytes", bytes);
  return guarded([&] { return doRecv(peer, data, bytes, tag); });
}

Status Transport::sendRecv(
    int to, const void* data, size_t bytes, int from, ByteVector* received, uint32_t tag) {
  ZEN_CHECK_ARG(to == -1 || (to >= 0 && to < size_ && to != rank_),
                "sendRecv: destination {} is not another rank of {} nor -1 (this is rank {})", to,
                size_, rank_);
  ZEN_CHECK_ARG(from == -1 || (from >= 0 && from < size_ && from != rank_),
                "sendRecv: source {} is not another rank of {} nor -1 (this is rank {})", from,
                size_, rank_);
  ZEN_CHECK_ARG(tag <= kMaxUserTag, "sendRecv: tag {} above the user maximum {}", tag, kMaxUserTag);
  ZEN_CHECK_ARG(to == -1 || data != nullptr || bytes == 0, "sendRecv: null buffer of {} bytes",
                bytes);
  ZEN_CHECK_ARG(from == -1 || received != nullptr, "sendRecv: null output");
  return guarded([&] { return doSendRecv(to, data, bytes, from, received, tag); });
}

Status Transport::alltoallv(const std::vector<ConstBytes>& sends,
                            std::vector<ByteVector>* received) {
  ZEN_CHECK_ARG(received != nullptr, "alltoallv: null output");
  ZEN_CHECK_ARG(sends.size() == static_cast<size_t>(size_),
                "alltoallv: {} send buffers for {} ranks", sends.size(), size_);
  for (const ConstBytes& s : sends) {
    ZEN_CHECK_ARG(s.data != nullptr || s.size == 0, "alltoallv: null buffer of {} bytes", s.size);
  }
  return guarded([&] { return doAlltoallv(sends, received); });
}

Status Transport::allgatherv(const void* data, size_t bytes, std::vector<ByteVector>* gathered) {
  ZEN_CHECK_ARG(gathered != nullptr, "allgatherv: null output");
  ZEN_CHECK_ARG(data != nullptr || bytes == 0, "allgatherv: null buffer of {} bytes", bytes);
  return guarded([&] { return doAllgatherv(data, bytes, gathered); });
}

Status Transport::allreduce(void* data, size_t count, DataType dtype, ReduceOp op) {
  ZEN_CHECK_ARG(data != nullptr || count == 0, "allreduce: null buffer of {} elements", count);
  ZEN_CHECK_ARG(dtype <= DataType::kInt64, "allreduce: unknown dtype code {}",
                static_cast<int>(dtype));
  ZEN_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
                    op == ReduceOp::kProduct,
                "allreduce: the transport reduces with sum, min, max or product, not {} (op code "
                "{}); an average is a sum the caller divides",
                reduceOpName(op), static_cast<int>(op));
  return guarded([&] { return doAllreduce(data, count, dtype, op); });
}

Status Transport::reducescatter(void* data,
                                const std::vector<size_t>& counts,
                                DataType dtype,
                                ReduceOp op) {
  ZEN_CHECK_ARG(counts.size() == static_cast<size_t>(size_),
                "reducescatter: {} block counts for {} ranks", counts.size(), size_);
  size_t count = 0;
  for (size_t c : counts) count += c;
  ZEN_CHECK_ARG(data != nullptr || count == 0, "reducescatter: null buffer of {} elements", count);
  ZEN_CHECK_ARG(dtype <= DataType::kInt64, "reducescatter: unknown dtype code {}",
                static_cast<int>(dtype));
  ZEN_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
                    op == ReduceOp::kProduct,
                "reducescatter: the transport reduces with sum, min, max or product, not {} (op "
                "code {}); an average is a sum the caller divides",
                reduceOpName(op), static_cast<int>(op));
  return guarded([&] { return doReducescatter(data, counts, dtype, op); });
}

Status Transport::broadcast(void* data, size_t bytes, int root) {
  ZEN_CHECK_ARG(root >= 0 && root < size_, "broadcast: root {} outside [0, {})", root, size_);
  ZEN_CHECK_ARG(data != nullptr || bytes == 0, "broadcast: null buffer of {} bytes", bytes);
  return guarded([&] { return doBroadcast(data, bytes, root); });
}

Status Transport::barrier() {
  return guarded([&] { return doBarrier(); });
}

Result<std::unique_ptr<Transport>> Transport::subset(const std::vector<int32_t>& members,
                                                     int32_t setId) {
  ZEN_CHECK_ARG(setId >= 1 && setId <= kMaxProcessSetId,
                "subset: process set id {} outside [1, {}]", setId, kMaxProcessSetId);
  ZEN_CHECK_ARG(!members.empty(), "subset: process set {} has no members", setId);
  for (size_t i = 0; i < members.size(); ++i) {
    ZEN_CHECK_ARG(members[i] >= 0 && members[i] < size_,
                  "subset: process set {} names rank {}, outside [0, {})", setId, members[i],
                  size_);
    ZEN_CHECK_ARG(i == 0 || members[i - 1] < members[i],
                  "subset: process set {} members are not strictly ascending: [{}]", setId,
                  fmt::join(members, ", "));
  }
  ZEN_CHECK_ARG(std::binary_search(members.begin(), members.end(), rank_),
                "subset: rank {} is not a member of process set {}: [{}]", rank_, setId,
                fmt::join(members, ", "));
  Result<std::unique_ptr<Transport>> made = guarded([&] { return doSubset(members, setId); });
  if (!made.isOk()) return made;
  Transport& child = *made.value();
  const int position = rankInSet(members, rank_);
  if (child.rank_ != position || child.size_ != static_cast<int>(members.size())) {
    return ZEN_ERROR(StatusCode::kInternal,
                     "subset: the {} backend made rank {} of {} for process set {}, expected "
                     "rank {} of {}",
                     backendName(), child.rank_, child.size_, setId, position, members.size());
  }
  child.root_ = root_;
  child.processSet_ = setId;
  for (int32_t m : members) child.jobRanks_.push_back(jobRank(m));
  return made;
}

int Transport::jobRank(int rank) const {
  return jobRanks_.empty() ? rank : jobRanks_[rank];
}

std::string Transport::who() const {
  if (processSet_ == 0) return fmt::format("rank {}", rank_);
  return fmt::format("rank {} (process set {})", jobRank(rank_), processSet_);
}

TransportCounters Transport::counters() const {
  TransportCounters c;
  c.bytesSent.resize(size_);
  c.bytesReceived.resize(size_);
  for (int p = 0; p < size_; ++p) {
    c.bytesSent[p] = sent_[p].load(std::memory_order_relaxed);
    c.bytesReceived[p] = received_[p].load(std::memory_order_relaxed);
  }
  return c;
}

void Transport::resetCounters() {
  for (int p = 0; p < size_; ++p) {
    sent_[p].store(0, std::memory_order_relaxed);
    received_[p].store(0, std::memory_order_relaxed);
  }
}

Clock::time_point Transport::deadline() const {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(timeoutSeconds_));
}

void Transport::countSent(int peer, size_t bytes) {
  sent_[peer].fetch_add(bytes, std::memory_order_relaxed);
}

void Transport::countReceived(int peer, size_t bytes) {
  received_[peer].fetch_add(bytes, std::memory_order_relaxed);
}

std::string wirePhaseName(const Transport& transport, const char* op) {
  std::string out = std::string(transport.backendName()) + "_" + op;
  for (char& c : out) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

}  // namespace zen::ops
